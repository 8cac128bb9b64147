package httpserver

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/websocket"

	"sigs.k8s.io/gateway-api-conformance-images/internal/echoutil"
)

// Handler routes the requests of the HTTP and HTTPS ports:
//
//   - /health answers 200 "OK";
//   - /status/NNN answers with status NNN and no body (400 when NNN is not a
//     three-digit status code);
//   - /retry/... simulates a flaky backend, driven by query parameters:
//     among the requests carrying the same "uuid" (required), the first
//     "succeedAfter" (required, a number) fail, each after the optional
//     "delayRetry" duration, by resetting the TCP connection or, when
//     "responseCode" is a number, with that status and no body; later ones
//     are echoed;
//   - /ws accepts a websocket and sends every frame back;
//   - any other path is echoed.
//
// An echo waits for the optional "delay" query duration, then answers 200
// with the RequestAssertions of the request as JSON, adding the response
// headers that X-Echo-Set-Header request headers ask for ("Name:value"
// pairs separated by commas, names kept as written).
//
// Paths are matched with runs of slashes collapsed, and never redirected:
// the echo reports the request URI exactly as it arrived.
func (s *Server) Handler() http.Handler {
	ws := websocket.Handler(s.websocketEcho)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := collapseSlashes(r.URL.Path); {
		case p == "/health":
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("OK"))
		case strings.HasPrefix(p, "/status/"):
			status(w, p)
		case strings.HasPrefix(p, "/retry/"):
			s.retry(w, r)
		case p == "/ws":
			ws.ServeHTTP(w, r)
		default:
			s.echo(w, r)
		}
	})
}

// H2CHandler is the handler of the H2C port: it echoes HTTP/2 requests and
// HTTP/1 requests carrying "Upgrade: h2c", and answers others with 400
// "Expected h2c request".
func (s *Server) H2CHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 && !strings.EqualFold(r.Header.Get("Upgrade"), "h2c") {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte("Expected h2c request"))
			return
		}
		s.echo(w, r)
	})
}

func collapseSlashes(p string) string {
	if !strings.Contains(p, "//") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '/' && i > 0 && p[i-1] == '/' {
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

var statusPath = regexp.MustCompile(`^/status/([1-9][0-9][0-9])$`)

func status(w http.ResponseWriter, path string) {
	code := http.StatusBadRequest
	if m := statusPath.FindStringSubmatch(path); m != nil {
		code, _ = strconv.Atoi(m[1])
	}
	w.WriteHeader(code)
}

// echo answers with the RequestAssertions of r, after the "delay" query
// duration if any.
func (s *Server) echo(w http.ResponseWriter, r *http.Request) {
	s.logf("Echoing back request made to %s to client (%s)", r.RequestURI, r.RemoteAddr)
	if !wait(w, r, "delay") {
		return
	}
	body, err := json.MarshalIndent(RequestAssertions{
		Path:     r.RequestURI,
		Host:     r.Host,
		Method:   r.Method,
		Proto:    r.Proto,
		Headers:  r.Header,
		HTTPPort: s.HTTPPort,
		Context:  s.Context,
		TLS:      tlsAssertions(r.TLS),
	}, "", " ")
	if err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	setEchoHeaders(w.Header(), r.Header)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(body)
}

// setEchoHeaders adds to the response the headers that the X-Echo-Set-Header
// request headers list. The names are used as written (HTTP/1 responses keep
// their case); a name given twice gets its values joined by commas.
func setEchoHeaders(resp, req http.Header) {
	for _, list := range req.Values("X-Echo-Set-Header") {
		for pair := range strings.SplitSeq(list, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(pair), ":")
			name, value = strings.TrimSpace(name), strings.TrimSpace(value)
			if name == "" {
				continue
			}
			if old := resp[name]; len(old) > 0 {
				old[0] += "," + value
			} else {
				resp[name] = []string{value}
			}
		}
	}
}

func tlsAssertions(st *tls.ConnectionState) *TLSAssertions {
	if st == nil {
		return nil
	}
	return &TLSAssertions{
		Version:            echoutil.TLSVersion(st.Version),
		PeerCertificates:   echoutil.PEMCertificates(st.PeerCertificates),
		ServerName:         st.ServerName,
		NegotiatedProtocol: st.NegotiatedProtocol,
		CipherSuite:        tls.CipherSuiteName(st.CipherSuite),
	}
}

// wait sleeps for the duration in query parameter key, if present. It
// returns false when the request is over: the value was not a duration (the
// client got a 500) or the client went away.
func wait(w http.ResponseWriter, r *http.Request, key string) bool {
	v := r.URL.Query().Get(key)
	if v == "" {
		return true
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// fail answers with an error status and a JSON {"message": ...} body.
func fail(w http.ResponseWriter, code int, msg string) {
	body, _ := json.Marshal(struct {
		Message string `json:"message"`
	}{msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// retrySimulation counts the attempts made under each retry uuid. Counts
// are kept for the life of the server.
type retrySimulation struct {
	mu       sync.Mutex
	attempts map[string]int
}

// fails counts one attempt under id and reports whether it must fail.
func (rs *retrySimulation) fails(id string, succeedAfter int) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.attempts == nil {
		rs.attempts = map[string]int{}
	}
	if rs.attempts[id] >= succeedAfter {
		return false
	}
	rs.attempts[id]++
	return true
}

func (s *Server) retry(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := q.Get("uuid")
	if id == "" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("uuid is required"))
		return
	}
	succeedAfter, err := strconv.Atoi(q.Get("succeedAfter"))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("succeedAfter is required"))
		return
	}
	code, codeErr := strconv.Atoi(q.Get("responseCode"))
	if codeErr == nil && (code < 100 || code > 999) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("responseCode must be an HTTP status code"))
		return
	}
	if !s.retries.fails(id, succeedAfter) {
		s.echo(w, r)
		return
	}
	if !wait(w, r, "delayRetry") {
		return
	}
	if codeErr == nil {
		w.WriteHeader(code)
		return
	}
	resetConnection(w)
}

// resetConnection aborts the request's connection with a TCP RST (linger 0,
// then close, skipping any TLS close_notify). HTTP/2 connections cannot be
// taken over: there the request's stream is reset instead.
func resetConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

// websocketEcho sends every frame it receives back, with the same type (text
// or binary), until the connection ends.
func (s *Server) websocketEcho(ws *websocket.Conn) {
	s.logf("established websocket connection %s", ws.Request().RemoteAddr)
	s.trackWebsocket(ws, true)
	defer s.trackWebsocket(ws, false)
	defer ws.Close()
	for {
		var f frame
		if err := frameCodec.Receive(ws, &f); err != nil {
			return
		}
		if err := frameCodec.Send(ws, &f); err != nil {
			return
		}
	}
}

// frame is one websocket message with its payload type.
type frame struct {
	payload []byte
	kind    byte
}

var frameCodec = websocket.Codec{
	Marshal: func(v any) ([]byte, byte, error) {
		f := v.(*frame)
		return f.payload, f.kind, nil
	},
	Unmarshal: func(data []byte, kind byte, v any) error {
		f := v.(*frame)
		f.payload, f.kind = data, kind
		return nil
	},
}
