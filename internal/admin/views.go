package admin

import (
	"io"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/pipeline"
	"github.com/portico-dev/portico/internal/render"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// Debug views of the translations: the pipeline hands out its latest
// Result (pipeline.Pipeline.Latest) and the views render it here, where
// they are served, so that the translation loop depends on no renderer.
// Each view is of the Result latest pointed to when it was asked for:
// Results are immutable, so writing one while the pipeline publishes the
// next is safe, and a view writes its document piece by piece
// (render.WriteGatewayXDS) rather than building it. Secret material and
// header values are redacted (DebugRedaction).

// DebugRedaction is what the debug views redact.
var DebugRedaction = render.StreamOptions{Options: render.Options{RedactSecrets: true}, RedactHeaders: true}

// Translations hand out the latest translation: *pipeline.Pipeline.
type Translations interface {
	// Latest is the last published translation, nil before the first.
	Latest() *pipeline.Result
}

// PipelineViews is the DebugSource of src's translations: /debug/xds is
// the configuration served to a Gateway, /debug/status the statuses of
// the last translation (an empty list before the first).
func PipelineViews(src Translations) DebugSource { return pipelineViews{src} }

type pipelineViews struct{ src Translations }

// DebugXDS is the configuration served to gateway ("ns/name"); false if
// no such Gateway is served.
func (v pipelineViews) DebugXDS(gateway string) (io.WriterTo, bool) {
	l := v.src.Latest()
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

// DebugStatus is the statuses of the last translation.
func (v pipelineViews) DebugStatus() io.WriterTo {
	l := v.src.Latest()
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
