// Package api holds what the two versions of the bank (packages bank and
// lockbased) share of their HTTP API: strict decoding of request bodies,
// JSON answers and JSON errors, 404 and 405 included, so that both answer
// every request alike.
package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// MaxBody bounds a request body; the largest valid one is a few dozen
// bytes.
const MaxBody = 1 << 10

// Decode reads r's body as exactly one JSON object whose members are named
// as in fields, case-sensitively, each at most once, and decodes each
// member's value into the pointer fields maps its name to. It refuses, with
// an error that says why: an empty body, anything but an object, an
// unknown member (one that differs from a known name only in case is named
// as such), a duplicate member, a value of the wrong type, anything but
// white space after the object (trailing data, a second JSON value), and a
// body longer than MaxBody (a *http.MaxBytesError). encoding/json alone
// would accept the last four: it matches names regardless of case, keeps
// the last of duplicates and stops reading after the first value.
func Decode(w http.ResponseWriter, r *http.Request, fields map[string]any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	tok, err := dec.Token()
	switch {
	case errors.Is(err, io.EOF):
		return errors.New("empty body: want a JSON object")
	case err != nil:
		return badJSON(err)
	case tok != json.Delim('{'):
		return fmt.Errorf("want a JSON object, got %s", describe(tok))
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return badJSON(err)
		}
		name, _ := tok.(string) // dec.Token checks that a member name is a string
		dst, ok := fields[name]
		if !ok {
			for known := range fields {
				if strings.EqualFold(known, name) {
					return fmt.Errorf("unknown field %q: names are case-sensitive, did you mean %q?", name, known)
				}
			}
			return fmt.Errorf("unknown field %q", name)
		}
		if seen[name] {
			return fmt.Errorf("duplicate field %q", name)
		}
		seen[name] = true
		if err := dec.Decode(dst); err != nil {
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) {
				return fmt.Errorf("field %q: want %s, got a JSON %s", name, typeErr.Type, typeErr.Value)
			}
			return badJSON(err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return badJSON(err)
	}
	switch tok, err := dec.Token(); {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil:
		return fmt.Errorf("a second JSON value (%s) after the object: send one object", describe(tok))
	default:
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return err
		}
		return errors.New("trailing data after the JSON object")
	}
}

// errSlowBody: the body did not arrive within the server's ReadTimeout.
var errSlowBody = errors.New("the body did not arrive within the read timeout")

// badJSON words a decoding error; a body over MaxBody stays a
// *http.MaxBytesError.
func badJSON(err error) error {
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return err
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return errSlowBody
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errors.New("bad JSON: the body ends inside the object")
	}
	return fmt.Errorf("bad JSON: %v", err)
}

func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	default:
		return "a number"
	}
}

// FailDecode answers a request whose body Decode refused: 413 for a body
// over MaxBody, 408 for one that did not arrive within the server's
// ReadTimeout, 400 otherwise, with the reason as a JSON error.
func FailDecode(w http.ResponseWriter, err error) {
	if errors.Is(err, errSlowBody) {
		Fail(w, http.StatusRequestTimeout, err.Error())
		return
	}
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		Fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", maxErr.Limit))
		return
	}
	Fail(w, http.StatusBadRequest, "bad request body: "+err.Error())
}

// Fail answers status with {"error": msg}.
func Fail(w http.ResponseWriter, status int, msg string) {
	WriteJSON(w, status, struct {
		Error string `json:"error"`
	}{msg})
}

// WriteJSON answers status with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do
}

// JSONErrors serves mux, answering the requests it has no route for in
// JSON as every other error: 404 {"error": "no route for GET /x"}, and 405
// with its Allow header and {"error": "method DELETE not allowed on
// /accounts/a: allowed GET, HEAD"}. Other answers of the mux's own (a
// redirect to a cleaned path) pass unchanged.
func JSONErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r) // sets the path values the handler reads
			return
		}
		rec := &recorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		switch rec.status {
		case http.StatusNotFound:
			Fail(w, http.StatusNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
		case http.StatusMethodNotAllowed:
			allow := rec.header.Get("Allow")
			w.Header().Set("Allow", allow)
			Fail(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s: allowed %s", r.Method, r.URL.Path, allow))
		default:
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.status)
			_, _ = w.Write(rec.body.Bytes())
		}
	})
}

// recorder keeps what the mux's own handlers (not found, method not
// allowed, redirect) write.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
