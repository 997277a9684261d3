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

	mux := http.NewServeMux()
	mux.Handle("/debug/perkey", debugpage.Handler(e))  // the page; ?format=json for JSON
	mux.Handle("/debug/perkey/", debugpage.Handler(e)) // /debug/perkey/json
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
	fmt.Println("submitted:", s.Stats.Submitted, "hot keys:", len(s.HotKeys))
	// Output: submitted: 1 hot keys: 0
}
