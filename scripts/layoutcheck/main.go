// Command layoutcheck serves a page of another server with a script added
// that measures the page as the browser laid it out, for
// scripts/check-debug-page.sh: headless Chromium can print a page's DOM
// (--dump-dom) but not its geometry, so the script writes what it measured
// into the DOM.
//
//	layoutcheck -target http://127.0.0.1:8080
//
// It listens on a free loopback port and prints "listening on URL". Every
// request is passed to target; an HTML answer gets, before </body>, a
// script that waits until the page has refreshed itself twice
// (data-refreshes on <body>) and then sets data-layout on <body> to "ok"
// or to "FAIL: " and what it found, and data-layout-detail to what it
// measured, as JSON. It checks that
//
//   - no two tables overlap, nor two sections;
//   - no table is wider than its section, nor the page wider than the
//     window (no horizontal scrolling);
//   - every key cell lies within its table, and one that shows a key
//     shortened (with "…") has the whole key in its title.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
)

func main() {
	target := flag.String("target", "", "base URL of the server whose pages to measure")
	flag.Parse()
	u, err := url.Parse(*target)
	if err != nil || u.Host == "" {
		log.Fatalf("-target %q: want a URL such as http://127.0.0.1:8080", *target)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = inject
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	log.Fatal(http.Serve(ln, proxy))
}

// inject adds the measuring script to an HTML answer.
func inject(resp *http.Response) error {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	// The page's own refreshes fetch the same URL and take only its
	// <main>: the script runs once, from the first answer.
	body = bytes.Replace(body, []byte("</body>"), []byte("<script>"+measure+"</script>\n</body>"), 1)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

const measure = `
(function () {
	"use strict";
	function rect(el) {
		const r = el.getBoundingClientRect();
		return {left: r.left, top: r.top, right: r.right, bottom: r.bottom};
	}
	function overlap(a, b) {
		const e = 0.5; // sub-pixel rounding
		return a.left < b.right - e && b.left < a.right - e && a.top < b.bottom - e && b.top < a.bottom - e;
	}
	function name(el) {
		const h = el.closest("section") && el.closest("section").querySelector("h2");
		return h ? h.textContent : el.tagName.toLowerCase();
	}
	function check() {
		const problems = [];
		const tables = Array.from(document.querySelectorAll("table"));
		const sections = Array.from(document.querySelectorAll("section"));
		const detail = {width: window.innerWidth, scrollWidth: document.documentElement.scrollWidth, tables: [], keys: []};
		for (const t of tables) {
			detail.tables.push(Object.assign({name: name(t)}, rect(t)));
		}
		for (let i = 0; i < tables.length; i++) {
			for (let j = i + 1; j < tables.length; j++) {
				if (overlap(rect(tables[i]), rect(tables[j]))) {
					problems.push("tables " + name(tables[i]) + " and " + name(tables[j]) + " overlap");
				}
			}
		}
		for (let i = 0; i < sections.length; i++) {
			for (let j = i + 1; j < sections.length; j++) {
				if (overlap(rect(sections[i]), rect(sections[j]))) {
					problems.push("sections " + name(sections[i]) + " and " + name(sections[j]) + " overlap");
				}
			}
		}
		for (const t of tables) {
			const s = t.closest("section");
			if (s && rect(t).right > rect(s).right + 0.5) {
				problems.push("table " + name(t) + " is wider than its section");
			}
		}
		if (detail.scrollWidth > window.innerWidth) {
			problems.push("the page is " + detail.scrollWidth + " px wide in a " + window.innerWidth + " px window");
		}
		for (const td of document.querySelectorAll("td.key")) {
			const r = rect(td), tr = rect(td.closest("table"));
			detail.keys.push({text: td.textContent, title: td.title, width: r.right - r.left, height: r.bottom - r.top});
			if (r.left < tr.left - 0.5 || r.right > tr.right + 0.5) {
				problems.push("key cell " + JSON.stringify(td.textContent) + " sticks out of its table");
			}
			if (td.textContent.includes("…") && (!td.title || td.title.length <= td.textContent.length)) {
				problems.push("key " + JSON.stringify(td.textContent) + " is shortened without the whole key in its title");
			}
		}
		document.body.dataset.layoutDetail = JSON.stringify(detail);
		document.body.dataset.layout = problems.length ? "FAIL: " + problems.join("; ") : "ok";
	}
	const wait = setInterval(function () {
		if (Number(document.body.dataset.refreshes) >= 2) {
			clearInterval(wait);
			check();
		}
	}, 100);
})();
`
