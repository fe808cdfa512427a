package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// Costs that grow with the job ([Vishnu09 §V], [Vishnu07 ch. 9]): connecting the ranks' queue
// pairs, and arming and migrating them (APM). Creating a queue pair and moving it through
// RESET→INIT→RTR→RTS, loading an alternate path and migrating to it are work of the host's CPU
// (of the provider's, here), which the fabric's virtual clock does not price; they are measured
// on this machine's clock, on the fabric's devices outside a bubble. What the network adds —
// the connection manager's handshakes of on-demand connections — runs on the scale model
// (SimModel) in virtual time.

// Names of the scale simulations besides the barrier's (goarmci bench NAME -sim).
const (
	ScaleQPSetup = "qp-setup"
	ScaleAPM     = "apm"
)

// QPSetupOptions configures QPSetupSim.
type QPSetupOptions struct {
	Model SimModel
	// Ranks are the job sizes, one row each (default 2, 4, ..., 1024).
	Ranks []int
	// Progress, when set, is called after every job size with its wall time.
	Progress func(ranks int, wall time.Duration)
}

// qpCostPairs is how many queue pair pairs measure the cost of one queue pair's setup.
const qpCostPairs = 256

// QPSetupSim measures the cost of connecting a job's ranks against its size: the wall time on
// this machine of creating and connecting one RC queue pair (RESET→INIT→RTR→RTS, the median of
// qpCostPairs pairs on two fabric nodes), hence the transitions of a rank connecting every other
// rank at start-up (eager: N−1 queue pairs per rank and rail, every rank in parallel); and, in a
// job of N ranks on the model connected on demand (the hybridft manager on the fabric device,
// GOARMCI_ON_DEMAND_THRESHOLD=0 for these jobs, the variable restored after), the queue pairs a
// rank holds after dissemination barriers, their transitions, and the virtual time of the first
// barrier (which dials them: the connection manager's REQ/REP/RTU) and of a later one. bubble is
// as HotspotSim's. Errors wrap ErrOptions, and the fabric's or rma's.
func QPSetupSim(ctx context.Context, o QPSetupOptions, bubble func(func())) ([]*Result, error) {
	o.Model = o.Model.withDefaults()
	if err := o.Model.check(); err != nil {
		return nil, err
	}
	if len(o.Ranks) == 0 {
		o.Ranks = []int{2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
	}
	for _, n := range o.Ranks {
		if n < 2 || n > 2048 {
			return nil, fmt.Errorf("%w: qp-setup simulation: ranks %d (2..2048)", ErrOptions, n)
		}
	}
	perQP, err := qpSetupCost(qpCostPairs)
	if err != nil {
		return nil, err
	}
	us := float64(perQP) / float64(time.Microsecond)
	res := &Result{Name: ScaleQPSetup, KeyLabel: "Ranks", Ranks: slices.Max(o.Ranks), Transport: "fabric (simulated)",
		Title: "# goarmci queue pair setup vs job size ([Vishnu09 §IV.B.2, §V])",
		Header: []string{o.Model.header(),
			fmt.Sprintf("One RC queue pair created and connected (RESET->INIT->RTR->RTS): %.1f us on this machine (median of %d pairs)", us, qpCostPairs),
			"Eager: N-1 queue pairs per rank at start-up; on demand: those a rank holds after 3 dissemination barriers (mean over ranks)",
			"Transitions per rank = queue pairs x the measured cost; barriers in virtual time (the first one dials)"},
		Columns: []string{"eager QPs/rank", "eager setup/rank (ms)", "on-demand QPs/rank", "on-demand setup/rank (ms)",
			"first barrier (us)", "later barrier (us)"}}
	restore := setEnv("GOARMCI_ON_DEMAND_THRESHOLD", "0")
	defer restore()
	for _, n := range o.Ranks {
		start := time.Now()
		var st onDemandStats
		var err error
		bubble(func() { st, err = onDemandJob(ctx, o.Model.forJob(n), n) })
		if err != nil {
			return nil, fmt.Errorf("bench: qp-setup simulation, %d ranks: %w", n, err)
		}
		res.Rows = append(res.Rows, Row{Size: n, Values: []float64{float64(n - 1), float64(n-1) * us / 1e3,
			st.qps, st.qps * us / 1e3, st.first, st.later}})
		if o.Progress != nil {
			o.Progress(n, time.Since(start))
		}
	}
	return []*Result{res}, nil
}

// setEnv sets an environment variable and returns what restores it.
func setEnv(k, v string) func() {
	old, had := os.LookupEnv(k)
	_ = os.Setenv(k, v)
	return func() {
		if had {
			_ = os.Setenv(k, old)
		} else {
			_ = os.Unsetenv(k)
		}
	}
}

type onDemandStats struct {
	qps          float64 // queue pairs per rank (mean)
	first, later float64 // µs
}

// onDemandJob runs one job of n ranks connected on demand (call it inside a bubble).
func onDemandJob(ctx context.Context, m SimModel, n int) (onDemandStats, error) {
	var mu sync.Mutex
	var st onDemandStats
	job := rmatest.FabricJob{Fabric: m.fabricConfig(n), Configure: m.configure}
	err := rmatest.StartFabricJob(ctx, n, job, func(ctx context.Context, rt *rma.Runtime) error {
		t0 := time.Now()
		if err := rt.BarrierWith(ctx, rma.BarrierDissemination); err != nil {
			return err
		}
		t1 := time.Now()
		if err := rt.BarrierWith(ctx, rma.BarrierDissemination); err != nil {
			return err
		}
		t2 := time.Now()
		if err := rt.BarrierWith(ctx, rma.BarrierDissemination); err != nil {
			return err
		}
		k := 0
		for p := range rt.Size() {
			if rt.Connected(p) {
				k++
			}
		}
		mu.Lock()
		st.qps += float64(k) / float64(n)
		st.first = max(st.first, float64(t1.Sub(t0))/float64(time.Microsecond))
		st.later = max(st.later, float64(t2.Sub(t1))/float64(time.Microsecond))
		mu.Unlock()
		return nil
	})
	return st, err
}

// qpPair is two connected RC queue pairs of two fabric nodes, and a registered buffer each.
type qpPair struct{ a, b *ibv.QP }

// rcEnds are the resources of one end of a two-node measurement.
type rcEnd struct {
	dev  *ibv.Context
	pd   *ibv.PD
	cq   *ibv.CQ
	port ibv.PortAttr
}

func openEnd(f *fabric.Fabric, node, cqe int) (*rcEnd, error) {
	dev, err := f.Open(node)
	if err != nil {
		return nil, err
	}
	e := &rcEnd{dev: dev}
	if e.pd, err = dev.AllocPD(); err == nil {
		if e.cq, err = dev.CreateCQ(cqe); err == nil {
			e.port, err = dev.QueryPort(1)
		}
	}
	if err != nil {
		return nil, errors.Join(err, dev.Close())
	}
	return e, nil
}

// connectRC creates one queue pair on each end and connects them (RESET→INIT→RTR→RTS).
func connectRC(a, b *rcEnd) (qpPair, error) {
	var p qpPair
	var err error
	if p.a, err = a.pd.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: a.cq, RecvCQ: a.cq}); err != nil {
		return p, err
	}
	if p.b, err = b.pd.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: b.cq, RecvCQ: b.cq}); err != nil {
		return p, err
	}
	const psn = 0x100
	init := &ibv.QPAttr{State: ibv.StateInit, PortNum: 1, AccessFlags: ibv.AccessAll}
	for _, s := range []struct {
		qp     *ibv.QP
		remote ibv.PortAttr
		dest   uint32
	}{{p.a, b.port, p.b.Num()}, {p.b, a.port, p.a.Num()}} {
		if err := s.qp.Modify(init, ibv.AttrState|ibv.AttrPort|ibv.AttrAccessFlags); err != nil {
			return p, err
		}
		av := ibv.AHAttr{Addr: s.remote.Addr, DLID: s.remote.LID, PortNum: 1}
		if err := s.qp.Modify(&ibv.QPAttr{State: ibv.StateRTR, AV: av, DestQPN: s.dest, RQPSN: psn},
			ibv.AttrState|ibv.AttrAV|ibv.AttrDestQPN|ibv.AttrRQPSN); err != nil {
			return p, err
		}
		if err := s.qp.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: psn}, ibv.AttrState|ibv.AttrSQPSN); err != nil {
			return p, err
		}
	}
	return p, nil
}

// twoNodes opens a fabric of two nodes (LMC 1: two paths between them) and both ends.
func twoNodes(cqe int) (f *fabric.Fabric, a, b *rcEnd, closeAll func() error, err error) {
	f, err = fabric.New(fabric.Config{Name: "scale", Nodes: 2, LMC: 1})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if a, err = openEnd(f, 0, cqe); err != nil {
		return nil, nil, nil, nil, errors.Join(err, f.Close())
	}
	if b, err = openEnd(f, 1, cqe); err != nil {
		return nil, nil, nil, nil, errors.Join(err, a.dev.Close(), f.Close())
	}
	return f, a, b, func() error { return errors.Join(a.dev.Close(), b.dev.Close(), f.Close()) }, nil
}

// qpSetupCost is the median wall time of creating and connecting one queue pair (of k pairs).
func qpSetupCost(k int) (time.Duration, error) {
	_, a, b, closeAll, err := twoNodes(64)
	if err != nil {
		return 0, err
	}
	ds := make([]time.Duration, 0, k)
	for range k {
		t0 := time.Now()
		if _, err := connectRC(a, b); err != nil {
			return 0, errors.Join(err, closeAll())
		}
		ds = append(ds, time.Since(t0)/2)
	}
	return medianDuration(ds), closeAll()
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// APMOptions configures APMSim.
type APMOptions struct {
	// QPs are the numbers of queue pairs, one row each (default 16, 64, 256, 1024, 2048).
	QPs []int
	// Puts is the number of timed 8-byte puts while the queue pairs are idle, and per round of
	// migrations (at most one per migration; default 20).
	Puts int
	// Progress, when set, is called after every row with its wall time.
	Progress func(qps int, wall time.Duration)
}

// APMSim measures APM against the number of queue pairs [Vishnu07 ch. 9]: k queue pairs between
// two fabric nodes with two paths (LMC 1), the wall time on this machine of arming all of them
// (loading the alternate path, Modify RTS→RTS with REARM, until the provider has probed it and
// every one is ARMED) and of migrating all of them (manual migration, Modify to MIGRATED), and
// the latency of an 8-byte RDMA write (put) on another queue pair between the two nodes, idle
// and between the migrations of the k queue pairs (one put after every k/Puts migrations, median
// and maximum). The fabric runs on real time here.
// Errors wrap ErrOptions, and the fabric's.
func APMSim(ctx context.Context, o APMOptions) ([]*Result, error) {
	if len(o.QPs) == 0 {
		o.QPs = []int{16, 64, 256, 1024, 2048}
	}
	if o.Puts == 0 {
		o.Puts = 20
	}
	if o.Puts < 1 {
		return nil, fmt.Errorf("%w: apm simulation: puts %d", ErrOptions, o.Puts)
	}
	for _, k := range o.QPs {
		if k < 1 || k > 1<<14 {
			return nil, fmt.Errorf("%w: apm simulation: queue pairs %d (1..16384)", ErrOptions, k)
		}
	}
	res := &Result{Name: ScaleAPM, KeyLabel: "QPs", Transport: "fabric (real time)",
		Title: "# goarmci APM arm and migration vs queue pairs ([Vishnu07 ch. 9])",
		Header: []string{"Two fabric nodes, two paths (LMC 1); wall time on this machine",
			"arm: load the alternate path of every queue pair until all are ARMED; migrate: manual migration of all",
			"put: 8-byte RDMA write on another queue pair, posted and completed, idle and between the migrations; medians of 5 rounds"},
		Columns: []string{"arm all (ms)", "migrate all (ms)", "arm/QP (us)", "migrate/QP (us)",
			"put idle (us)", "put in migration median (us)", "put in migration max (us)"}}
	for _, k := range o.QPs {
		start := time.Now()
		row, err := apmRow(ctx, k, o.Puts)
		if err != nil {
			return nil, fmt.Errorf("bench: apm simulation, %d queue pairs: %w", k, err)
		}
		res.Rows = append(res.Rows, Row{Size: k, Values: row})
		if o.Progress != nil {
			o.Progress(k, time.Since(start))
		}
	}
	return []*Result{res}, nil
}

// apmRounds is how many times APMSim arms and migrates every queue pair (the medians are
// reported).
const apmRounds = 5

// armAll loads the alternate path of every queue pair — the peer's LID with the other path
// bits — and waits until the provider has probed every one and it is ARMED.
func armAll(ctx context.Context, pairs []qpPair) (time.Duration, error) {
	t0 := time.Now()
	for _, p := range pairs {
		av := p.a.Query().AV
		bits := 1 - av.SrcPathBits
		alt := ibv.AHAttr{Addr: av.Addr, DLID: av.DLID - uint16(av.SrcPathBits) + uint16(bits), SrcPathBits: bits, PortNum: 1}
		if err := p.a.Modify(&ibv.QPAttr{AltAV: alt, AltPortNum: 1, PathMigState: ibv.Rearm},
			ibv.AttrAltPath|ibv.AttrPathMigState); err != nil {
			return 0, fmt.Errorf("arm: %w", err)
		}
	}
	for _, p := range pairs {
		for p.a.Query().PathMigState != ibv.Armed {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			if time.Since(t0) > time.Minute {
				return 0, errors.New("arm: a queue pair stayed unarmed for a minute")
			}
			time.Sleep(10 * time.Microsecond)
		}
	}
	return time.Since(t0), nil
}

// apmRow measures one row of APMSim.
func apmRow(ctx context.Context, k, puts int) (vals []float64, err error) {
	_, a, b, closeAll, err := twoNodes(4096)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, closeAll()) }()
	pairs := make([]qpPair, k)
	for i := range pairs {
		if pairs[i], err = connectRC(a, b); err != nil {
			return nil, err
		}
	}
	ping, err := connectRC(a, b)
	if err != nil {
		return nil, err
	}
	src, err := a.pd.RegMR(make([]byte, 8), ibv.AccessLocalWrite)
	if err != nil {
		return nil, err
	}
	dst, err := b.pd.RegMR(make([]byte, 8), ibv.AccessAll)
	if err != nil {
		return nil, err
	}
	var wcs [16]ibv.WC
	put := func() (time.Duration, error) {
		t0 := time.Now()
		if err := ping.a.PostSend(&ibv.SendWR{ID: 1, Opcode: ibv.OpRDMAWrite, Flags: ibv.SendSignaled,
			SGL: []ibv.SGE{src.SGE(0, 8)}, RemoteAddr: dst.Addr, RKey: dst.RKey}); err != nil {
			return 0, err
		}
		for {
			for _, wc := range wcs[:a.cq.Poll(wcs[:])] {
				if wc.Status != ibv.WCSuccess {
					return 0, fmt.Errorf("put completed with %v", wc.Status)
				}
				return time.Since(t0), nil
			}
			if time.Since(t0) > time.Minute {
				return 0, errors.New("put: no completion for a minute")
			}
			runtime.Gosched()
		}
	}
	var idle []time.Duration
	for range puts {
		d, err := put()
		if err != nil {
			return nil, err
		}
		idle = append(idle, d)
	}
	// apmRounds rounds of arming every queue pair and migrating every one while puts run; the
	// alternate path is the other path bits of the peer's LID, so the rounds go back and forth
	var arms, migs, during []time.Duration
	for range apmRounds {
		arm, err := armAll(ctx, pairs)
		if err != nil {
			return nil, err
		}
		// migrate every queue pair, a put between every stride of migrations (the migrations'
		// time is theirs alone)
		var mig time.Duration
		stride := max(1, len(pairs)/puts)
		for i, p := range pairs {
			t := time.Now()
			if err := p.a.Modify(&ibv.QPAttr{PathMigState: ibv.Migrated}, ibv.AttrPathMigState); err != nil {
				return nil, fmt.Errorf("migrate: %w", err)
			}
			mig += time.Since(t)
			if i%stride == stride-1 && i < len(pairs)-1 {
				d, err := put()
				if err != nil {
					return nil, err
				}
				during = append(during, d)
			}
		}
		for _, p := range pairs {
			if s := p.a.Query().PathMigState; s != ibv.Migrated {
				return nil, fmt.Errorf("migrate: a queue pair is %v", s)
			}
		}
		arms, migs = append(arms, arm), append(migs, mig)
	}
	arm, mig := medianDuration(arms), medianDuration(migs)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	medDuring, maxDuring := 0.0, 0.0 // one queue pair: no put between migrations
	if len(during) > 0 {
		medDuring, maxDuring = us(medianDuration(during)), us(slices.Max(during))
	}
	return []float64{ms(arm), ms(mig), us(arm) / float64(k), us(mig) / float64(k),
		us(medianDuration(idle)), medDuring, maxDuring}, nil
}
