package webhook

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Standard Webhooks headers.
const (
	HeaderID        = standardwebhooks.HeaderWebhookID
	HeaderTimestamp = standardwebhooks.HeaderWebhookTimestamp
	HeaderSignature = standardwebhooks.HeaderWebhookSignature
)

// signature returns the webhook-signature header of one attempt: one
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per secret, separated by
// spaces, so receivers holding either secret of a rotation verify it.
// Signing is the Standard Webhooks reference library's.
func (k *keyring) signature(id string, ts time.Time, body []byte) (string, error) {
	sigs := make([]string, 0, len(k.secrets))
	for _, s := range k.secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return "", err // checked at load: cannot happen
		}
		sig, err := wh.Sign(id, ts, body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}

// setHeaders sets the Standard Webhooks headers of one attempt.
func (k *keyring) setHeaders(h http.Header, id string, ts time.Time, body []byte) error {
	sig, err := k.signature(id, ts, body)
	if err != nil {
		return err
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, sig)
	return nil
}
