package rmatest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/rma"
)

// Option changes how Run starts the ranks.
type Option func(*options)

type options struct {
	transport rma.Transport
	timeout   time.Duration
	hosts     func(rank int) string
	configure func(rank int, c *rma.Config)
	group     func(g *Group)
	fabric    fabric.Config
	onFabric  func(f *fabric.Fabric)
}

// Transport selects the transport between the ranks (default shm).
func Transport(t rma.Transport) Option { return func(o *options) { o.transport = t } }

// Timeout bounds the whole run (default 2 minutes); ranks' contexts end then.
func Timeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// Hosts assigns ranks to pretend nodes: ranks with the same host id share memory, others use
// the network.
func Hosts(f func(rank int) string) Option { return func(o *options) { o.hosts = f } }

// Configure changes each rank's rma.Config before Init (rails, striping policy, ...); the
// harness sets Bootstrap, Transport, HostID and Job first.
func Configure(f func(rank int, c *rma.Config)) Option { return func(o *options) { o.configure = f } }

// UseGroup hands the ranks' bootstrap group to f before the ranks start, so a test can inject a
// rank's failure (Group.Fail). After a failure, Finalize errors wrapping rma.ErrPeerFailed are
// expected and not reported.
func UseGroup(f func(g *Group)) Option { return func(o *options) { o.group = f } }

var jobSeq atomic.Int64

// Run starts n ranks as goroutines, each with its own rma.Runtime, runs body on every rank and
// finalizes. t's failures are per rank: a failing rank stops (as t.FailNow does) and cancels the
// context of the others, so no rank hangs in a collective. Body must use ctx for every blocking
// call.
func Run(t *testing.T, n int, body func(ctx context.Context, t testing.TB, rt *rma.Runtime), opts ...Option) {
	t.Helper()
	o := options{transport: rma.TransportShm, timeout: 2 * time.Minute}
	for _, f := range opts {
		f(&o)
	}
	run(t, n, body, &o, func(i int, cfg *rma.Config) {
		cfg.Transport = o.transport
		cfg.HostID = "rmatest"
		if o.hosts != nil {
			cfg.HostID = o.hosts(i)
		}
	})
}

// run is Run and RunFabric: base fills in each rank's configuration (its Bootstrap and Job are
// set), then o.configure changes it.
func run(t *testing.T, n int, body func(ctx context.Context, t testing.TB, rt *rma.Runtime), o *options, base func(i int, cfg *rma.Config)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	g := NewGroup(n)
	if o.group != nil {
		o.group(g)
	}
	job := fmt.Sprintf("t%d-%d", time.Now().UnixNano()%1e9, jobSeq.Add(1))
	var wg sync.WaitGroup
	ranks := make([]*rankT, n)
	for i := 0; i < n; i++ {
		rt := &rankT{TB: t, rank: i}
		ranks[i] = rt
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if rt.failed.Load() {
					cancel()
					g.Close()
				}
			}()
			cfg := &rma.Config{Bootstrap: g.Member(i), Job: job}
			base(i, cfg)
			if o.configure != nil {
				o.configure(i, cfg)
			}
			r, err := rma.Init(ctx, cfg)
			if err != nil {
				rt.Errorf("rank %d: Init: %v", i, err)
				return
			}
			finalized := false
			defer func() {
				if !finalized {
					cancel() // a failed rank: stop the others before cleaning up
					g.Close()
					_ = r.Finalize(ctx) // releases resources; errors expected
				}
			}()
			body(ctx, rt, r)
			if rt.failed.Load() {
				return
			}
			finalized = true
			if err := r.Finalize(ctx); err != nil && !(g.Failed() && errors.Is(err, rma.ErrPeerFailed)) {
				rt.Errorf("rank %d: Finalize: %v", i, err)
			}
		}()
	}
	wg.Wait()
}

// rankT is one rank's testing.TB: failures are recorded on the real test and end the rank's
// goroutine.
type rankT struct {
	testing.TB
	rank   int
	failed atomic.Bool
}

func (r *rankT) Errorf(format string, args ...any) {
	r.failed.Store(true)
	r.TB.Errorf("rank %d: "+format, append([]any{r.rank}, args...)...)
}

func (r *rankT) Error(args ...any) {
	r.failed.Store(true)
	r.TB.Error(append([]any{fmt.Sprintf("rank %d:", r.rank)}, args...)...)
}

func (r *rankT) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *rankT) Fatal(args ...any) {
	r.Error(args...)
	runtime.Goexit()
}

func (r *rankT) Fail() {
	r.failed.Store(true)
	r.TB.Fail()
}

func (r *rankT) FailNow() {
	r.Fail()
	runtime.Goexit()
}

func (r *rankT) Failed() bool { return r.failed.Load() }

// Results runs body on every rank of an n-rank job as Run does, fails the test on any rank's
// error, and returns each rank's result, indexed by rank.
func Results[R any](t *testing.T, n int, body func(ctx context.Context, rt *rma.Runtime) (R, error), opts ...Option) []R {
	t.Helper()
	results := make([]R, n)
	Run(t, n, func(ctx context.Context, tb testing.TB, rt *rma.Runtime) {
		res, err := body(ctx, rt)
		if err != nil {
			tb.Fatalf("rank %d: %v", rt.Rank(), err)
		}
		results[rt.Rank()] = res
	}, opts...)
	return results
}
