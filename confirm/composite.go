package confirm

// CompositeRefusal says why a composite — a command tool whose handler
// calls other tools through its per-call context endpoint (tool.json
// uses.tools, SPEC §2.3 and §4.1) — may not call t, or "" when it may.
// A composite's children run inside its call, where nobody can be asked:
// a requires-confirmation tool would need a person, and a connection tool
// (the request tool, an OpenAPI operation) would send a request that its
// policy gates (the handler reaches connections through the endpoint's
// request, gated by its own confirm). The registry refuses such a
// composite at load and the endpoint refuses the call (403), whatever the
// load said.
func CompositeRefusal(t *Tool) string {
	if t == nil {
		return ""
	}
	if t.Kind == KindRequest || t.Kind == KindOperation {
		return "it is a connection tool (a composite reaches connections through its context endpoint's request)"
	}
	if t.Exposure == ExposureRequiresConfirmation {
		return "it requires confirmation, and a composite's children run without a prompt"
	}
	return ""
}
