package admin

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/portico-dev/portico/internal/proxysync"
)

// ProxySource is a replica's report of its proxies (package proxysync)
// and the revision of what it reports: equal revisions, equal reports
// but for their time.
type ProxySource interface {
	ProxyReport(replica string) proxysync.Report
	ProxyRevision() uint64
}

// ProxiesHandler serves GET /debug/proxies: the report of src with replica
// as the replica's name, as JSON. Query parameters: gateway=NS/NAME and
// node=ID keep those proxies only; summary=true leaves out the resources
// not ACKed but those of rejected types (what the leader's aggregation
// fetches: it traces rejections to routes). The ETag is the
// revision: a request whose If-None-Match names the current one gets 304.
func ProxiesHandler(replica string, src ProxySource) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		etag := `"` + strconv.FormatUint(src.ProxyRevision(), 10) + `"`
		if r.Header.Get("If-None-Match") == etag {
			w.Header().Set("ETag", etag)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		rep := src.ProxyReport(replica)
		gw, node := q.Get("gateway"), q.Get("node")
		summary := q.Get("summary") == "true"
		kept := rep.Proxies[:0]
		for _, p := range rep.Proxies {
			if (gw != "" && p.Gateway != gw) || (node != "" && p.NodeID != node) {
				continue
			}
			if summary {
				for i := range p.Types {
					if p.Types[i].Nack == nil { // a NACK's are kept: the leader traces them to routes
						p.Types[i].Unacked = nil
					}
				}
			}
			kept = append(kept, p)
		}
		rep.Proxies = kept
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("ETag", etag)
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep) // a write error: the client went away
	})
}
