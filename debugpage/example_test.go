package debugpage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/perkey/perkey/debugpage"
	"github.com/perkey/perkey/executor"
)

func ExampleHandler() {
	e, err := executor.New[string]()
	if err != nil {
		panic(err)
	}
	defer e.Close(context.Background())

	// With a *metrics.Collector c as e's Observer, pass
	// debugpage.WithLatency(c) too, for wait and run percentiles.
	h := debugpage.Handler(e)
	mux := http.NewServeMux()
	mux.Handle("/debug/perkey", h)  // the page; ?format=json for JSON
	mux.Handle("/debug/perkey/", h) // /debug/perkey/json
	srv := httptest.NewServer(mux)
	defer srv.Close()

	_ = e.Do(context.Background(), "acct-1", func(context.Context) error { return nil })

	resp, err := http.Get(srv.URL + "/debug/perkey/json")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var s debugpage.Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		panic(err)
	}
	fmt.Println("submitted:", s.Stats.Submitted, "hot keys:", len(s.HotKeys), "workers:", s.Settings.Workers > 0)
	// Output: submitted: 1 hot keys: 0 workers: true
}
