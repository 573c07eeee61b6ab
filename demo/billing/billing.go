// Package billing is the small billing HTTP API of the demo project: orders,
// invoices and refunds, kept in memory. `agentd serve` without --project
// starts it on a loopback port and points the demo's "billing" connection
// (demo/connections/billing) at it, so the request tool and the OpenAPI
// operation tools have something real to call. Tests use Requests to see
// exactly what arrived.
//
// Routes, all under /api and all JSON:
//
//	GET    /api/orders/{id}     an order (A-1001 … A-1005)
//	GET    /api/invoices        every invoice that was not deleted
//	GET    /api/invoices/{id}   an invoice (INV-2001 … INV-2003)
//	PATCH  /api/invoices/{id}   edit memo and/or amount
//	DELETE /api/invoices/{id}   delete an invoice
//	POST   /api/refunds         {"order_id", "amount", "reason"?} → 201, honouring Idempotency-Key
//	POST   /api/reports/run     {"kind"?} → a read-only report
package billing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// maxBody bounds a request body.
const maxBody = 64 << 10

// Order is a customer order.
type Order struct {
	ID       string  `json:"id"`
	Customer string  `json:"customer"`
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
	Status   string  `json:"status"`
	// Refunded is the total refunded so far.
	Refunded float64 `json:"refunded"`
}

// Invoice is an invoice of an order.
type Invoice struct {
	ID      string  `json:"id"`
	OrderID string  `json:"order_id"`
	Amount  float64 `json:"amount"`
	Memo    string  `json:"memo"`
	Status  string  `json:"status"`
}

// Refund is a refund record.
type Refund struct {
	ID        string    `json:"id"`
	OrderID   string    `json:"order_id"`
	Amount    float64   `json:"amount"`
	Reason    string    `json:"reason,omitempty"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
}

// Request is one request the API received.
type Request struct {
	Method string
	Path   string // the escaped path, e.g. /api/orders/A-1001
	Query  url.Values
	Header http.Header
	Body   []byte
}

// API is the demo billing API. It is safe for concurrent use.
type API struct {
	mu       sync.Mutex
	orders   map[string]*Order
	invoices map[string]*Invoice
	refunds  []*Refund
	// byKey maps an Idempotency-Key to the response it got first.
	byKey    map[string]keyed
	requests []Request
	now      func() time.Time
}

type keyed struct {
	status int
	body   []byte
}

// New returns the API with its initial orders and invoices.
func New() *API {
	a := &API{orders: map[string]*Order{}, invoices: map[string]*Invoice{}, byKey: map[string]keyed{}, now: time.Now}
	for _, o := range []*Order{
		{ID: "A-1001", Customer: "Ada Lovelace", Amount: 4200, Currency: "EUR", Status: "delivered"},
		{ID: "A-1002", Customer: "Grace Hopper", Amount: 15000, Currency: "EUR", Status: "delivered"},
		{ID: "A-1003", Customer: "Alan Turing", Amount: 250000, Currency: "EUR", Status: "shipped"},
		{ID: "A-1004", Customer: "Katherine Johnson", Amount: 89.9, Currency: "EUR", Status: "processing"},
		{ID: "A-1005", Customer: "Edsger Dijkstra", Amount: 1200, Currency: "EUR", Status: "cancelled"},
	} {
		a.orders[o.ID] = o
	}
	for _, inv := range []*Invoice{
		{ID: "INV-2001", OrderID: "A-1001", Amount: 4200, Memo: "Order A-1001", Status: "paid"},
		{ID: "INV-2002", OrderID: "A-1002", Amount: 15000, Memo: "Order A-1002", Status: "open"},
		{ID: "INV-2003", OrderID: "A-1003", Amount: 250000, Memo: "Order A-1003", Status: "open"},
	} {
		a.invoices[inv.ID] = inv
	}
	return a
}

// Handler returns the API's HTTP handler; every route is under /api.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/orders/{id}", a.getOrder)
	mux.HandleFunc("GET /api/invoices", a.listInvoices)
	mux.HandleFunc("GET /api/invoices/{id}", a.getInvoice)
	mux.HandleFunc("PATCH /api/invoices/{id}", a.updateInvoice)
	mux.HandleFunc("DELETE /api/invoices/{id}", a.deleteInvoice)
	mux.HandleFunc("POST /api/refunds", a.createRefund)
	mux.HandleFunc("POST /api/reports/run", a.runReport)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil {
			writeError(w, http.StatusBadRequest, "cannot read the body")
			return
		}
		if len(body) > maxBody {
			writeError(w, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		a.mu.Lock()
		a.requests = append(a.requests, Request{Method: r.Method, Path: r.URL.EscapedPath(),
			Query: r.URL.Query(), Header: r.Header.Clone(), Body: body})
		a.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if _, pattern := mux.Handler(r); pattern == "" {
			// No route: the mux answers 404 or 405, in JSON here.
			rec := &statusOnly{header: http.Header{}}
			mux.ServeHTTP(rec, r)
			if v := rec.header.Get("Allow"); v != "" {
				w.Header().Set("Allow", v)
			}
			if rec.status == 0 {
				rec.status = http.StatusNotFound
			}
			writeError(w, rec.status, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// statusOnly captures the status and headers of the mux's own 404/405.
type statusOnly struct {
	header http.Header
	status int
}

func (s *statusOnly) Header() http.Header         { return s.header }
func (s *statusOnly) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusOnly) WriteHeader(status int)      { s.status = status }

// Requests returns a copy of every request received so far, oldest first.
func (a *API) Requests() []Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Request, len(a.requests))
	for i, r := range a.requests {
		out[i] = Request{Method: r.Method, Path: r.Path, Query: maps.Clone(r.Query), Header: r.Header.Clone(), Body: slices.Clone(r.Body)}
	}
	return out
}

// Refunds returns a copy of every refund made, oldest first.
func (a *API) Refunds() []Refund {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Refund, len(a.refunds))
	for i, r := range a.refunds {
		out[i] = *r
	}
	return out
}

func (a *API) getOrder(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.orders[r.PathValue("id")]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("order %q not found", r.PathValue("id")))
		return
	}
	writeJSON(w, http.StatusOK, o)
}

func (a *API) listInvoices(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	a.mu.Lock()
	defer a.mu.Unlock()
	list := []*Invoice{}
	for _, id := range slices.Sorted(maps.Keys(a.invoices)) {
		if inv := a.invoices[id]; status == "" || inv.Status == status {
			list = append(list, inv)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"invoices": list})
}

func (a *API) getInvoice(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	inv, ok := a.invoices[r.PathValue("id")]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("invoice %q not found", r.PathValue("id")))
		return
	}
	writeJSON(w, http.StatusOK, inv)
}

func (a *API) updateInvoice(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Memo   *string  `json:"memo"`
		Amount *float64 `json:"amount"`
	}
	if !decode(w, r, &in) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	inv, ok := a.invoices[r.PathValue("id")]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("invoice %q not found", r.PathValue("id")))
		return
	}
	if in.Amount != nil && (*in.Amount < 0 || math.IsInf(*in.Amount, 0)) {
		writeError(w, http.StatusUnprocessableEntity, "amount must not be negative")
		return
	}
	if in.Memo != nil {
		inv.Memo = *in.Memo
	}
	if in.Amount != nil {
		inv.Amount = *in.Amount
	}
	writeJSON(w, http.StatusOK, inv)
}

func (a *API) deleteInvoice(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := r.PathValue("id")
	if _, ok := a.invoices[id]; !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("invoice %q not found", id))
		return
	}
	delete(a.invoices, id)
	w.WriteHeader(http.StatusNoContent)
}

// createRefund refunds part of an order. A repeated Idempotency-Key gets
// the first response again and makes no second refund.
func (a *API) createRefund(w http.ResponseWriter, r *http.Request) {
	var in struct {
		OrderID string   `json:"order_id"`
		Amount  *float64 `json:"amount"`
		Reason  string   `json:"reason"`
	}
	if !decode(w, r, &in) {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	a.mu.Lock()
	defer a.mu.Unlock()
	if k, ok := a.byKey[key]; ok && key != "" {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(k.status)
		_, _ = w.Write(k.body)
		return
	}
	status, body := a.refund(in.OrderID, in.Amount, in.Reason)
	if key != "" {
		a.byKey[key] = keyed{status, body}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// refund makes a refund; the caller holds a.mu.
func (a *API) refund(orderID string, amount *float64, reason string) (int, []byte) {
	o, ok := a.orders[orderID]
	switch {
	case orderID == "":
		return errorBody(http.StatusUnprocessableEntity, "order_id is required")
	case !ok:
		return errorBody(http.StatusNotFound, fmt.Sprintf("order %q not found", orderID))
	case amount == nil || *amount <= 0 || math.IsInf(*amount, 0):
		return errorBody(http.StatusUnprocessableEntity, "amount must be a positive number")
	case o.Refunded+*amount > o.Amount:
		return errorBody(http.StatusUnprocessableEntity, fmt.Sprintf("refunds of order %s cannot exceed its amount %.2f (already refunded %.2f)", o.ID, o.Amount, o.Refunded))
	}
	o.Refunded += *amount
	if o.Refunded == o.Amount {
		o.Status = "refunded"
	}
	ref := &Refund{ID: fmt.Sprintf("R-%d", 3001+len(a.refunds)), OrderID: o.ID, Amount: *amount, Reason: reason,
		Status: "succeeded", CreatedAt: a.now().UTC().Truncate(time.Second)}
	a.refunds = append(a.refunds, ref)
	b, _ := json.Marshal(ref)
	return http.StatusCreated, b
}

// runReport returns a summary; it changes nothing.
func (a *API) runReport(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Kind string `json:"kind"`
	}
	if !decode(w, r, &in) {
		return
	}
	if in.Kind == "" {
		in.Kind = "summary"
	}
	if in.Kind != "summary" {
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("unknown report kind %q (only \"summary\")", in.Kind))
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var invoiced, open, refunded float64
	for _, inv := range a.invoices {
		invoiced += inv.Amount
		if inv.Status == "open" {
			open += inv.Amount
		}
	}
	for _, ref := range a.refunds {
		refunded += ref.Amount
	}
	writeJSON(w, http.StatusOK, map[string]any{"kind": in.Kind, "orders": len(a.orders), "invoices": len(a.invoices),
		"invoiced_total": invoiced, "open_total": open, "refunds": len(a.refunds), "refunded_total": refunded})
}

// decode reads a JSON object body (an empty body is {}), answering 400 on
// anything else.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, _ := io.ReadAll(r.Body)
	if len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "the body must be application/json")
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = errorBody(http.StatusInternalServerError, err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	status, b := errorBody(status, msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func errorBody(status int, msg string) (int, []byte) {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"message": msg}})
	return status, b
}
