package pipeline

import (
	"io"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/render"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// Debug views of the admin debug server (admin.DebugSource). Each is a
// view of the Result latest pointed to when it was asked for: Results are
// immutable, so writing one while Run publishes the next is safe, and the
// view writes its document piece by piece (render.WriteGatewayXDS) rather
// than building it. Secret material and header values are redacted.

// DebugRedaction is what the debug views redact.
var DebugRedaction = render.StreamOptions{Options: render.Options{RedactSecrets: true}, RedactHeaders: true}

// DebugXDS is the configuration served to gateway ("ns/name") as a JSON
// document written by WriteTo, with secret material and header values
// redacted; false if no such Gateway is served.
func (p *Pipeline) DebugXDS(gateway string) (io.WriterTo, bool) {
	l := p.latest.Load()
	if l == nil {
		return nil, false
	}
	for _, r := range l.XDS {
		if r.Gateway == gateway {
			return xdsView{r}, true
		}
	}
	return nil, false
}

// DebugStatus is the statuses of the last translation as a JSON list
// (empty before the first) written by WriteTo.
func (p *Pipeline) DebugStatus() io.WriterTo {
	l := p.latest.Load()
	if l == nil {
		return statusView{nil}
	}
	return statusView{l.Result}
}

type xdsView struct{ r *translate.Resources }

func (v xdsView) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	err := render.WriteGatewayXDS(cw, v.r, DebugRedaction)
	return cw.n, err
}

type statusView struct{ res *gatewayapi.Result }

func (v statusView) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	err := render.WriteStatuses(cw, v.res)
	return cw.n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
