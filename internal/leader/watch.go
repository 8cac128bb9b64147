package leader

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

const (
	// watchTimeout is how long the API server keeps one watch of the Lease
	// open; a watch that ended normally is resumed at once.
	watchTimeout = 5 * time.Minute
	// watchGrace bounds a watch on our side beyond watchTimeout, so that a
	// connection that went silent cannot keep us from watching.
	watchGrace = 30 * time.Second
	// maxWatchBackoff caps the wait between failed watches.
	maxWatchBackoff = 2 * time.Minute
)

// watchLease watches the Lease until ctx is done, records every version it
// sees in e.obs (for expiries, see expireLease and observer.adjust), and
// signals wakeReleased on wake (without blocking; one pending signal is
// kept) whenever the Lease is seen without a holder or deleted. A watch
// that fails, or ends within the retry period, is retried after a backoff
// that starts at the retry period and doubles up to maxWatchBackoff; a
// watch that ran longer is resumed at once, and one whose resourceVersion
// expired restarts from the current state.
func (e *Elector) watchLease(ctx context.Context, wake chan<- wakeReason) {
	backoff := e.cfg.RetryPeriod
	rv := ""
	failing := false
	for ctx.Err() == nil {
		start, from := time.Now(), rv
		var err error
		rv, err = e.watchOnce(ctx, rv, wake)
		if ctx.Err() != nil {
			return
		}
		// Resumed at once: a watch that ran for a while, or one whose
		// resourceVersion expired (the next starts from the current state).
		expired := from != "" && rv == ""
		if err == nil && (expired || time.Since(start) >= e.cfg.RetryPeriod) {
			backoff = e.cfg.RetryPeriod
			if failing {
				failing = false
				e.cfg.Log.Info("watching the lease again", "lease", e.cfg.Namespace+"/"+e.cfg.Name)
			}
			continue
		}
		if err != nil {
			level := e.cfg.Log.Warn
			if failing {
				level = e.cfg.Log.Debug
			}
			level("watching the lease failed; a released lease is taken over at the next retry until the watch works",
				"lease", e.cfg.Namespace+"/"+e.cfg.Name, "error", err, "retry_in", backoff)
			failing = true
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxWatchBackoff)
	}
}

// watchOnce runs one watch of the Lease from resourceVersion rv ("" starts
// with the current state) and returns the resourceVersion to resume from.
// It returns a nil error when the watch ended normally.
func (e *Elector) watchOnce(ctx context.Context, rv string, wake chan<- wakeReason) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, watchTimeout+watchGrace)
	defer cancel()
	timeout := int64(watchTimeout / time.Second)
	w, err := e.cfg.WatchClient.CoordinationV1().Leases(e.cfg.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector:       fields.OneTermEqualSelector("metadata.name", e.cfg.Name).String(),
		ResourceVersion:     rv,
		TimeoutSeconds:      &timeout,
		AllowWatchBookmarks: true,
	})
	if err != nil {
		return rv, err
	}
	defer w.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return rv, nil
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return rv, nil
		}
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return "", nil // too old to resume: start from the current state
			}
			return rv, err
		}
		lease, isLease := ev.Object.(*coordinationv1.Lease)
		if !isLease {
			continue
		}
		if lease.ResourceVersion != "" {
			rv = lease.ResourceVersion
		}
		if ev.Type == watch.Bookmark || lease.Name != e.cfg.Name {
			continue
		}
		if ev.Type == watch.Deleted {
			e.obs.forget()
		} else {
			e.obs.observe(lease)
		}
		if ev.Type == watch.Deleted || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			signal(wake, wakeReleased)
		}
	}
}
