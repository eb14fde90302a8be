package rcaextension

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// FuzzAPI: whatever a client puts in a req_id or a window, the answer is a
// status a client can act on, never a panic or a 5xx of the extension's own.
func FuzzAPI(f *testing.F) {
	f.Add("req-1715234890123-a1b2c3", "", "")
	f.Add("<script>", "2025-05-09T12:00:00Z", "1746792000000")
	f.Add("\xff", "-1", "99999999999999999999")
	handler := serve(f, openStore(f)).Config.Handler
	f.Fuzz(func(t *testing.T, reqID, from, to string) {
		q := url.Values{"from": {from}, "to": {to}}.Encode()
		for _, path := range []string{
			"/api/requests/" + url.PathEscape(reqID), "/api/requests/" + url.PathEscape(reqID) + "/compare",
			"/requests/" + url.PathEscape(reqID), "/api/failing?" + q, "/?" + q, "/api/rootcause?" + q, "/rootcause?" + q,
		} {
			req, err := http.NewRequest(http.MethodGet, "http://rca"+path, nil)
			if err != nil {
				continue
			}
			w := httptest.NewRecorder()
			handler.ServeHTTP(w, req)
			switch w.Code {
			case http.StatusOK, http.StatusBadRequest, http.StatusNotFound,
				http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect: // "." and ".." are cleaned away
			default:
				t.Fatalf("GET %s: %d %s", path, w.Code, w.Body.String())
			}
		}
	})
}
