package bench

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"strings"
	"time"
)

// auditEvent is the part of an audit.k8s.io/v1 Event the suite reads.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// StatusWrites counts successful status writes by resource ("gateways",
// "httproutes") and by object ("gateways/ns/name").
type StatusWrites struct {
	ByResource map[string]int
	ByObject   map[string]int
}

// CountStatusWrites reads an audit log and counts the successful status
// updates and patches made by Portico (user agent "portico/…") whose
// response completed in [from, to].
func CountStatusWrites(path string, from, to time.Time) (StatusWrites, error) {
	f, err := os.Open(path)
	if err != nil {
		return StatusWrites{}, err
	}
	defer f.Close()
	return countStatusWrites(f, from, to)
}

func countStatusWrites(r io.Reader, from, to time.Time) (StatusWrites, error) {
	out := StatusWrites{ByResource: map[string]int{}, ByObject: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line being written
		}
		if e.Stage != "ResponseComplete" || e.ObjectRef.Subresource != "status" ||
			(e.Verb != "update" && e.Verb != "patch") || !strings.HasPrefix(e.UserAgent, "portico/") ||
			e.ResponseStatus.Code < 200 || e.ResponseStatus.Code >= 300 ||
			e.StageTimestamp.Before(from) || e.StageTimestamp.After(to) {
			continue
		}
		out.ByResource[e.ObjectRef.Resource]++
		out.ByObject[e.ObjectRef.Resource+"/"+e.ObjectRef.Namespace+"/"+e.ObjectRef.Name]++
	}
	return out, sc.Err()
}
