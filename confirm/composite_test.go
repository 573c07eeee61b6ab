package confirm

import "testing"

func TestCompositeRefusal(t *testing.T) {
	for _, tc := range []struct {
		tool    *Tool
		refused bool
	}{
		{nil, false},
		{&Tool{Name: "lookup", Exposure: ExposureOpen}, false},
		{&Tool{Name: "label", Exposure: ExposureOperatorGated}, false},
		{&Tool{Name: "pay", Exposure: ExposureRequiresConfirmation}, true},
		{&Tool{Name: RequestToolName, Kind: KindRequest}, true},
		{&Tool{Name: "billing__getOrder", Kind: KindOperation}, true},
	} {
		if got := CompositeRefusal(tc.tool) != ""; got != tc.refused {
			t.Errorf("%+v: refused %v, want %v", tc.tool, got, tc.refused)
		}
	}
}
