package rma

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"runtime"
	"strings"

	"github.com/goarmci/goarmci/hybridft"
	"github.com/goarmci/goarmci/ibv/provider/shm"
	"github.com/goarmci/goarmci/multirail"
)

// sysSegment layout: barrier flags, then the collective scratch (one slot per rank).
const (
	barrierSlots  = 128 // the barrier algorithms' flag words (barrier_algos.go, barrier_rgm.go, barrier_hierarchical.go)
	flagBytes     = barrierSlots * 8
	scratchTotal  = 1 << 20 // bytes of collective scratch per rank, split into 2·Size slots
	minSlot       = 4096
	completionCQE = 1 << 16
)

// Init starts the runtime on this rank (ARMCI_Init): it joins the job through the bootstrap,
// learns which peers share its node, opens the shared-memory and network devices it needs,
// connects one RC channel to every peer and allocates the runtime's own segment. It is
// collective. Errors name the stage that failed; they wrap ErrConfig, ErrNoSpace (the
// shared-memory control file does not fit in GOARMCI_SHM_DIR / Config.ShmDir), a context error
// (the startup timeout) or the lower layer's error.
func Init(ctx context.Context, cfg *Config) (_ *Runtime, err error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if err := c.fillDefaults(); err != nil {
		return nil, err
	}
	if c.StartupTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.StartupTimeout)
		defer cancel()
	}
	r := &Runtime{cfg: c, live: map[int]*Segment{}, stats: c.Stats}
	if c.Logger != nil {
		r.log = *c.Logger
	} else {
		l, closer := newLogger(&c.env.cfg, -1)
		r.log = l
		if closer != nil {
			r.closers = append(r.closers, closer.Close)
		}
	}
	for _, w := range c.env.warnings {
		r.log.Warn().Msg(w.String())
	}
	defer func() {
		if err != nil {
			r.teardown()
		}
	}()
	if c.Bootstrap == nil {
		b, err := bootstrapFromEnv(ctx, r.log, &c.env.cfg)
		if err != nil {
			return nil, fmt.Errorf("rma: init: %w", err)
		}
		c.Bootstrap = b
		r.cfg.Bootstrap = b
	}
	r.boot = c.Bootstrap
	if r.cfg.Job == "" {
		// The bootstrap's job id is the same on every rank, whatever the launcher.
		if j, ok := r.boot.(interface{ JobID() string }); ok && j.JobID() != "" {
			r.cfg.Job = jobName(j.JobID())
		} else {
			r.cfg.Job = fmt.Sprintf("p%d", os.Getpid())
		}
	}
	r.closers = append(r.closers, r.boot.Close)
	r.rank, r.size = r.boot.Rank(), r.boot.Size()
	r.log = r.log.With().Int("rank", r.rank).Logger()
	if err := r.jobSecret(ctx); err != nil {
		return nil, fmt.Errorf("rma: init: job secret: %w", err)
	}

	// 1. Who shares my node (host id, and the process id: failed same-node ranks are fenced off
	// through it, failure.go).
	all, err := r.boot.AllGather(ctx, append(binary.LittleEndian.AppendUint32(nil, uint32(os.Getpid())), c.HostID...))
	if err != nil {
		return nil, fmt.Errorf("rma: init: host exchange: %w", err)
	}
	ids, pids := make([][]byte, len(all)), make([]int, len(all))
	for p, b := range all {
		if len(b) < 4 {
			return nil, fmt.Errorf("rma: init: host exchange: rank %d sent %d bytes: %w", p, len(b), errBlob)
		}
		pids[p], ids[p] = int(binary.LittleEndian.Uint32(b)), b[4:]
	}
	r.peers = make([]*peer, r.size)
	index, alone := 0, true
	for p, id := range ids {
		if machineOf(string(id)) == machineOf(c.HostID) {
			if p < r.rank {
				index++
			}
			if p != r.rank && pids[p] == pids[r.rank] {
				alone = false // ranks that are goroutines of this process
			}
			r.machineRanks++
		}
	}
	r.bindRank(index, r.machineRanks, alone)
	r.spin, r.yields = spinBudget(r.machineRanks, runtime.NumCPU()), pollYields
	r.pollSleep, r.pollSleepMax = pollSleepFirst, pollSleepLast
	if c.NetworkDevice != nil {
		// ranks are goroutines of one process on a simulated network (Config.NetworkDevice):
		// a wait sleeps at once, and a bubble's virtual time advances
		r.spin, r.yields = 0, 0
		if c.NetworkPoll > 0 {
			r.pollSleep, r.pollSleepMax = c.NetworkPoll, c.NetworkPoll
		}
	}
	anyLocal, anyRemote := false, false
	for p := range r.peers {
		pe := &peer{rank: p, net: -1, local: string(ids[p]) == c.HostID, pid: pids[p], pidfd: -1}
		pe.done = func(*multirail.Request) { pe.outstanding.Add(-1) }
		if c.Stats {
			pe.ctr = new(peerCounters)
		}
		r.peers[p] = pe
		if p != r.rank {
			if r.peers[p].local {
				anyLocal = true
			} else {
				anyRemote = true
			}
		}
	}
	if c.Transport == TransportShm && anyRemote {
		return nil, fmt.Errorf("%w: GOARMCI_TRANSPORT=shm but ranks span several nodes", ErrConfig)
	}
	// 2. Devices. Every rank opens the same kinds, so segment keys line up.
	useShm := c.Transport != TransportTCP && anyLocal
	useNet := c.Transport == TransportTCP || anyRemote
	flags, err := r.boot.AllGather(ctx, []byte{b2i(useShm), b2i(useNet), byte(c.Paths)})
	if err != nil {
		return nil, fmt.Errorf("rma: init: device exchange: %w", err)
	}
	for p, f := range flags {
		if len(f) >= 2 {
			useShm = useShm || f[0] == 1
			useNet = useNet || f[1] == 1
		}
		if len(f) >= 3 && int(f[2]) != c.Paths {
			return nil, fmt.Errorf("%w: rank %d uses %d paths per rail, this rank %d: GOARMCI_PATHS must be equal on every rank",
				ErrConfig, p, f[2], c.Paths)
		}
	}
	if useShm {
		if err := r.openShm(); err != nil {
			return nil, fmt.Errorf("rma: init: shared memory: %w", err)
		}
	}
	if useNet {
		if err := r.openNet(); err != nil {
			return nil, fmt.Errorf("rma: init: network: %w", err)
		}
		if err := r.openNetPath(); err != nil {
			return nil, fmt.Errorf("rma: init: network: %w", err)
		}
		r.tcpProcs(alone)
	}
	// 3. Connections: one RC channel per peer on its network.
	if err := r.connect(ctx); err != nil {
		return nil, fmt.Errorf("rma: init: connect: %w", err)
	}
	if r.ad != nil {
		r.ad.start()
	}
	fallback := r.fenceNode()
	r.watchFailures() // from now on: every peer and its connection exist
	r.fail.lease = fallback && r.fail.member != nil
	r.mappedFast = !r.stats && !r.fail.lease

	// 4. The runtime's own segment.
	slot := max(minSlot, (scratchTotal/r.size)&^127) // two sets of Size slots (collective.go)
	r.sys, err = r.Malloc(ctx, flagBytes+slot*r.size)
	if err != nil {
		return nil, fmt.Errorf("rma: init: system segment: %w", err)
	}
	if r.notify, err = r.Malloc(ctx, 8*r.size); err != nil { // notify counters, one per origin
		return nil, fmt.Errorf("rma: init: notify counters: %w", err)
	}
	r.notified, r.awaited = make([]int64, r.size), make([]int64, r.size)
	if err := r.setupBarrierQP(ctx); err != nil {
		return nil, fmt.Errorf("rma: init: %w", err)
	}
	r.chooseBarrierAlg(ids)
	r.reduce.doubling = r.reduceByDoubling(worldScratch{r})
	if err := r.boot.Barrier(ctx); err != nil {
		return nil, fmt.Errorf("rma: init: %w", err)
	}
	// Every node peer has opened this rank's shared-memory control file (its queue pairs are
	// connected): remove the file, so no abnormal end of the job can leave it behind.
	if n := r.netOf(TransportShm); n != nil {
		if err := shm.Unpublish(n.dev); err != nil {
			r.log.Warn().Err(err).Msg("rma: init: control file stays until Finalize")
		}
	}
	r.log.Debug().Int("size", r.size).Bool("shm", useShm).Bool("net", useNet).Msg("rma initialized")
	return r, nil
}

func b2i(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func (c *Config) fillDefaults() error {
	env, err := envConfig()
	if err != nil {
		return err
	}
	if c.Transport == "" {
		c.Transport = env.transport
	}
	switch c.Transport {
	case TransportAuto, TransportShm, TransportTCP:
	default:
		return fmt.Errorf("%w: transport %q (want auto, shm or tcp)", ErrConfig, c.Transport)
	}
	if len(c.Rails) == 0 {
		c.Rails = env.rails
	}
	for _, rail := range c.Rails { // checked even where no network is opened: a typo is an error
		if _, err := railPort(rail); err != nil {
			return err
		}
	}
	if c.StripePolicy == "" {
		c.StripePolicy = env.cfg.StripePolicy
	}
	if err := c.checkPaths(env.cfg.Paths); err != nil {
		return err
	}
	if c.StripeThreshold == 0 {
		c.StripeThreshold = int(env.cfg.StripeThreshold)
	}
	if c.HostID == "" {
		c.HostID = hostID()
	}
	if c.Job == "" {
		c.Job = env.job
	}
	if c.ShmDir == "" {
		c.ShmDir = env.cfg.ShmDir
	}
	if c.Barrier == "" {
		c.Barrier = env.cfg.Barrier
	}
	c.Barrier = strings.ToLower(strings.TrimSpace(c.Barrier))
	if c.NetworkTransport == "" {
		c.NetworkTransport = env.cfg.NetTransport
	}
	switch c.NetworkTransport = strings.ToLower(strings.TrimSpace(c.NetworkTransport)); c.NetworkTransport {
	case NetRC, NetDC, NetAdaptive:
	default:
		return fmt.Errorf("%w: network transport %q (want %s, %s or %s)", ErrConfig, c.NetworkTransport, NetRC, NetDC, NetAdaptive)
	}
	if err := checkBarrierName(c.Barrier); err != nil {
		return err
	}
	c.env = env
	if c.StartupTimeout == 0 {
		c.StartupTimeout = env.startup
	}
	c.Stats = c.Stats || env.cfg.Stats
	return nil
}

// connect creates the connections to every peer on the peer's network — one per rail (port) of
// the network device and path (Config.Paths, paths.go), the subchannels of the peer's multirail
// channel — and exchanges their
// connection information through the bootstrap. Rail i connects to the peer's rail i; when two
// ranks have different numbers of rails they use the rails both have.
func (r *Runtime) connect(ctx context.Context) error {
	conns := make([][]*hybridft.Conn, r.size)
	defer func() {
		for _, cs := range conns { // connections not handed to a channel
			for _, c := range cs {
				if c != nil {
					_ = c.Close()
				}
			}
		}
	}()
	// On demand (ondemand.go): network peers get no connection now, only our CM address.
	var odAddr []byte
	for i, n := range r.nets {
		if r.onDemand(n) {
			if err := r.startOnDemand(i); err != nil {
				return err
			}
			odAddr = n.od.Addr()
		}
	}
	var blob []byte
	r.odMu.Lock()
	for p, pe := range r.peers {
		var info []byte
		shared := false
		if p != r.rank {
			pe.net = r.netFor(pe)
			shared = len(r.nets[pe.net].dcqps) > 0
			pe.lazy = r.nets[pe.net].od != nil && !shared
		}
		if p != r.rank && !pe.lazy && !shared {
			eps := r.nets[pe.net].eps
			info = append(info, byte(len(eps)))
			for _, ep := range eps {
				c, err := ep.NewConn()
				if err != nil {
					r.odMu.Unlock()
					return err
				}
				conns[p] = append(conns[p], c)
				ci := c.Local().Marshal()
				info = append(info, byte(len(ci)))
				info = append(info, ci...)
			}
		}
		blob = binary.LittleEndian.AppendUint16(blob, uint16(len(info)))
		blob = append(blob, info...)
	}
	r.odMu.Unlock()
	// entry r.size: the CM address when this rank connects network peers on demand
	blob = binary.LittleEndian.AppendUint16(blob, uint16(len(odAddr)))
	blob = append(blob, odAddr...)
	// entry r.size+1: this rank's DC queue pairs when network peers go on the shared path
	dcb, err := r.dcBlob(r.netOf(TransportTCP))
	if err != nil {
		return err
	}
	blob = binary.LittleEndian.AppendUint16(blob, uint16(len(dcb)))
	blob = append(blob, dcb...)
	all, err := r.boot.AllGather(ctx, blob)
	if err != nil {
		return err
	}
	ccfg := r.channelConfig()
	for p, pe := range r.peers {
		if p == r.rank {
			continue
		}
		if len(r.nets[pe.net].dcqps) > 0 {
			dcb, err := entry(all[p], r.size+1)
			if err != nil {
				return fmt.Errorf("rank %d: %w", p, err)
			}
			if err := r.connectDC(pe, dcb); err != nil {
				return err
			}
			if r.ad != nil {
				addr, err := entry(all[p], r.size)
				if err != nil || len(addr) == 0 {
					return fmt.Errorf("%w: rank %d has no connection manager address: GOARMCI_NET_TRANSPORT and GOARMCI_FT must be equal on every rank", ErrConfig, p)
				}
				pe.odAddr = addr
			}
			continue
		}
		if dcb, err := entry(all[p], r.size+1); err == nil && len(dcb) > 0 && r.nets[pe.net].kind == TransportTCP {
			return fmt.Errorf("%w: rank %d uses the shared datagram path, this rank GOARMCI_NET_TRANSPORT=%s: it must be equal on every rank",
				ErrConfig, p, r.cfg.NetworkTransport)
		}
		if pe.lazy {
			addr, err := entry(all[p], r.size)
			if err != nil || len(addr) == 0 {
				return fmt.Errorf("%w: rank %d connects its network peers at Init, this rank on demand: "+
					"GOARMCI_ON_DEMAND_THRESHOLD and GOARMCI_FT must be equal on every rank", ErrConfig, p)
			}
			pe.odAddr = addr
			continue
		}
		info, err := entry(all[p], r.rank)
		if err != nil {
			return fmt.Errorf("rank %d: %w", p, err)
		}
		if len(info) == 0 {
			return fmt.Errorf("%w: rank %d connects on demand, this rank at Init: "+
				"GOARMCI_ON_DEMAND_THRESHOLD and GOARMCI_FT must be equal on every rank", ErrConfig, p)
		}
		cis, err := railInfos(info)
		if err != nil {
			return fmt.Errorf("rank %d: %w", p, err)
		}
		k := min(len(cis), len(conns[p]))
		for i := 0; i < k; i++ {
			lg := r.log.With().Int("peer", p).Int("rail", i).Logger()
			if err := conns[p][i].ConnectWith(cis[i], hybridft.ConnectOptions{Log: &lg}); err != nil {
				return fmt.Errorf("rank %d rail %d: %w", p, i, err)
			}
		}
		if r.nets[pe.net].kind == TransportShm {
			// a node peer: one queue pair that executes requests inside the post, used by its
			// route directly (no channel: nothing to stripe, nothing ever outstanding)
			if k != 1 || !conns[p][0].QP().CanPostSync() {
				return fmt.Errorf("%w: rank %d: shared-memory connection of %d rails", ErrConfig, p, k)
			}
			pe.conn, pe.qp = conns[p][0], conns[p][0].QP()
			for _, c := range conns[p][1:] {
				_ = c.Close()
			}
			conns[p] = nil
			continue
		}
		ch, err := r.nets[pe.net].net.NewChannelConfig(ccfg, conns[p][:k]...)
		pe.ch.Store(ch)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		for _, c := range conns[p][k:] {
			_ = c.Close()
		}
		conns[p] = nil
	}
	for _, pe := range r.peers {
		pe.route = r.routeFor(pe)
	}
	return nil
}

// channelConfig is the multirail configuration of every network channel.
func (r *Runtime) channelConfig() multirail.ChannelConfig {
	return multirail.ChannelConfig{Policy: r.cfg.StripePolicy, Threshold: r.cfg.StripeThreshold}
}

// railInfos decodes one peer's entry: a count, then per rail a length byte and a ConnInfo.
func railInfos(b []byte) ([]hybridft.ConnInfo, error) {
	if len(b) < 1 || b[0] == 0 {
		return nil, errBlob
	}
	n := int(b[0])
	b = b[1:]
	cis := make([]hybridft.ConnInfo, 0, n)
	for i := 0; i < n; i++ {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return nil, errBlob
		}
		ci, err := hybridft.UnmarshalConnInfo(b[1 : 1+int(b[0])])
		if err != nil {
			return nil, err
		}
		cis = append(cis, ci)
		b = b[1+int(b[0]):]
	}
	if len(b) != 0 {
		return nil, errBlob
	}
	return cis, nil
}

var errBlob = errors.New("rma: malformed exchange blob")

// entry returns the i-th length-prefixed entry of a blob.
func entry(b []byte, i int) ([]byte, error) {
	for k := 0; ; k++ {
		if len(b) < 2 {
			return nil, errBlob
		}
		n := int(binary.LittleEndian.Uint16(b))
		if len(b) < 2+n {
			return nil, errBlob
		}
		if k == i {
			return b[2 : 2+n], nil
		}
		b = b[2+n:]
	}
}

// netFor picks the network that reaches a peer.
func (r *Runtime) netFor(pe *peer) int {
	want := TransportTCP
	if pe.local && r.cfg.Transport != TransportTCP {
		want = TransportShm
	}
	for i, n := range r.nets {
		if n.kind == want {
			return i
		}
	}
	return 0
}

// Finalize ends the runtime (ARMCI_Finalize): it is collective (a barrier first), then closes
// every channel and device and stops every goroutine the runtime started. Segments not freed are
// released.
func (r *Runtime) Finalize(ctx context.Context) error {
	if r.finalized.Load() {
		return ErrFinalized
	}
	berr := r.Barrier(ctx)
	if berr == nil {
		// Out of band: once every rank is here, every rank's last RDMA operation has been
		// acknowledged, so closing the devices strands no peer's retry.
		berr = r.boot.Barrier(ctx)
	}
	if r.stats {
		r.writeStats(os.Stderr) // before teardown: the channels' counters are still there
	}
	r.finalized.Store(true)
	r.teardown()
	if berr != nil {
		return fmt.Errorf("rma: finalize: %w", berr)
	}
	return nil
}

func (r *Runtime) teardown() {
	if r.ad != nil {
		r.ad.stop() // before the channels close
	}
	r.closeFences()
	r.odMu.Lock()
	r.odClosed = true // no channel is installed from now on
	r.odMu.Unlock()
	for _, pe := range r.peers {
		if pe == nil {
			continue
		}
		for _, ch := range pe.channels() {
			_ = ch.Close()
		}
		if pe != nil && pe.conn != nil {
			_ = pe.conn.Close()
		}
	}
	r.segMu.Lock()
	for id, s := range r.live {
		_ = s.release()
		delete(r.live, id)
	}
	r.segMu.Unlock()
	for i := len(r.closers) - 1; i >= 0; i-- {
		if err := r.closers[i](); err != nil {
			r.log.Debug().Err(err).Msg("finalize")
		}
	}
	r.closers = nil
}

// jobName turns a launcher's job id ("1234.0" for a Slurm step, an Open MPI namespace such as
// "prterun-node-1234@1") into a name for the job's shared-memory files, which allow letters,
// digits, '_' and '-': other characters become '-', and then a hash of the whole id keeps
// distinct ids distinct.
func jobName(id string) string {
	b := []byte(id)
	changed := false
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i], changed = '-', true
		}
	}
	if !changed {
		return id
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return fmt.Sprintf("%s-%08x", b, h.Sum32())
}
