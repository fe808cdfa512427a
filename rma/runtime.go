package rma

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/goarmci/goarmci/hybridft"
	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/config"
	"github.com/goarmci/goarmci/internal/secret"
	"github.com/goarmci/goarmci/multirail"
)

// Bootstrap is the out-of-band service the runtime starts from (internal/bootstrap implements
// it over the launcher's environment): rank, size and collective exchange of small blobs.
type Bootstrap interface {
	Rank() int
	Size() int
	// AllGather is collective: every rank contributes data and receives all contributions,
	// indexed by rank.
	AllGather(ctx context.Context, data []byte) ([][]byte, error)
	Barrier(ctx context.Context) error
	Close() error
}

// Transport selects how ranks reach each other.
type Transport string

const (
	// TransportAuto: shared memory between ranks of one node, the network between nodes.
	TransportAuto Transport = "auto"
	// TransportShm: shared memory only (all ranks must share a node).
	TransportShm Transport = "shm"
	// TransportTCP: the network (RC over TCP) for every peer, even on one node.
	TransportTCP Transport = "tcp"
)

// Config configures Init. The zero value (or a nil *Config) takes everything from the
// environment (GOARMCI_* variables and the launcher's).
type Config struct {
	// Bootstrap, when set, is used instead of the launcher environment (tests, embedding).
	Bootstrap Bootstrap
	// Transport, default from GOARMCI_TRANSPORT or TransportAuto.
	Transport Transport
	// Rails are the network addresses (IPs) the network provider listens on, one per rail;
	// default: GOARMCI_RAILS, else the address this rank reaches the rendezvous from, else
	// 127.0.0.1.
	Rails []string
	// StripePolicy is the multi-rail scheduling policy of the network channels (package
	// multirail/sched spec: "auto", "fragment", "even", "bss:2", ...); default
	// GOARMCI_STRIPE_POLICY.
	StripePolicy string
	// StripeThreshold is the switchover threshold in bytes below which operations are not
	// striped; default GOARMCI_STRIPE_THRESHOLD.
	StripeThreshold int
	// Paths is the number of paths per rail (1..64; default GOARMCI_PATHS, 1): every network
	// peer's channel gets rails × Paths subchannels, one RC queue pair per (rail, path bits),
	// the path bits routed as LMC offsets of the peer's LID [Vishnu07 §2.2, ch. 7] (paths.go).
	// Every rank must use the same value.
	Paths int
	// HostID overrides node detection (ranks with equal HostID share memory); default
	// hostname + boot id.
	HostID string
	// Job names this job's shared-memory files; default from the launcher.
	Job string
	// ShmDir is the directory of the shared-memory control files (a tmpfs, the same for every
	// rank of a node); default GOARMCI_SHM_DIR (/dev/shm). Init fails with an error wrapping
	// ErrNoSpace when it has no room for them.
	ShmDir string
	// Logger for runtime events; default from GOARMCI_LOG_LEVEL.
	Logger *zerolog.Logger
	// StartupTimeout bounds Init's waits (default 60 s or GOARMCI_STARTUP_TIMEOUT).
	StartupTimeout time.Duration
	// Stats counts communication statistics (Runtime.Stats) and writes them to standard error
	// at Finalize (readable lines; one JSON line per rank with GOARMCI_STATS=json); default
	// GOARMCI_STATS.
	Stats bool
	// NetworkDevice, when set, opens the device this rank reaches its network peers through,
	// instead of the tcp provider on Rails (for tests and simulations: ibv/fabric's Fabric.Open
	// of the rank's node, so a job of many ranks runs in one process, inside a testing/synctest
	// bubble on virtual time). The device's ports are the rails, one RC connection per port and
	// peer (Rails is ignored). Init calls it once, after the host exchange, on every rank when
	// any rank of the job has network peers; the runtime owns the device from then on and closes it at Finalize (or
	// when Init fails). An error it returns fails Init, wrapped.
	//
	// With a given device the runtime runs without the hybridft manager (as GOARMCI_FT=false
	// does) unless NetworkDeviceFT is set: its connections are plain RC (a connection that
	// exhausts its retries fails its operations with ErrTransport) and every network peer is
	// connected at Init, whatever GOARMCI_ON_DEMAND_THRESHOLD says. Ranks with different HostIDs
	// are network peers; give every rank its own HostID for a job of network peers only.
	//
	// The ranks of such a job are goroutines of one process, so the runtime's waits neither spin
	// nor sched_yield: they back off to sleeps at once (which pass in virtual time inside a
	// bubble; a yielding wait would keep the bubble busy and cost a system call per poll).
	NetworkDevice func() (*ibv.Context, error)
	// NetworkDeviceFT runs the hybridft manager on the device of NetworkDevice, as over the tcp
	// provider (GOARMCI_FT=false still turns it off), its UD connection manager on the device's
	// UD queue pairs (hybridft.Options.CMDevice): software recovery of broken connections and
	// ErrPartition after the partition timeout [Vishnu09 §IV], on-demand connection setup above
	// GOARMCI_ON_DEMAND_THRESHOLD ranks, and APM where the device's ports have several LIDs.
	// Every rank must set the same value. Off by default: on a fat tree with LMC paths, APM's
	// alternate paths change where traffic goes (the striping figures assume they do not).
	NetworkDeviceFT bool
	// NetworkPoll, when positive with NetworkDevice, is the fixed sleep of a wait between two
	// polls, instead of sleeps from 20 µs doubling to 1 ms: the time resolution of a simulation
	// on virtual time (each poll of each waiting rank is an event of the bubble, so a shorter
	// one costs more of the machine's time).
	NetworkPoll time.Duration
	// Barrier is the algorithm of Barrier: "auto" (chosen at Init from the job's nodes, ranks,
	// transport and multicast: barrier_choice.go) or a BarrierAlg's name; default
	// GOARMCI_BARRIER. Every rank must use the same value. Init fails with ErrConfig for an
	// unknown name; an algorithm the job cannot run (a datagram barrier without a network) gives
	// way to auto's choice, with a warning.
	Barrier string
	// NetworkTransport is how network peers are reached (netpath.go): NetRC, NetDC or
	// NetAdaptive; default GOARMCI_NET_TRANSPORT ("rc"). Every rank must use the same value.
	// NetAdaptive needs the hybridft manager (GOARMCI_FT, and Config.NetworkDeviceFT on a given
	// device): RC connections are dialled on demand through its UD connection manager.
	NetworkTransport string

	env envDefaults
}

// peer is the runtime's view of one other rank.
type peer struct {
	rank  int
	local bool // same node
	net   int  // index into Runtime.nets; -1 for self
	// ch is the channel operations to a network peer go on: nil until connected (on demand: see
	// ondemand.go); under dc and adaptive (netpath.go) dc or rc, switched by the adaptive driver
	// while gate holds new operations back (begin).
	ch          atomic.Pointer[multirail.Channel]
	dc          *multirail.Channel // the shared datagram path's channel (dc, adaptive), or nil
	rc          *multirail.Channel // adaptive: the peer's RC connection while open (in use or pooled), under odMu
	gate        atomic.Bool        // a path switch drains the peer's operations: begin waits (netpath.go)
	sent        atomic.Int64       // adaptive: operations issued to the peer (the selector's statistics)
	sentBytes   atomic.Int64       // adaptive: their bytes
	qp          *ibv.QP            // node peers: the shared-memory queue pair (route.go: nodeRoute)
	conn        *hybridft.Conn     // node peers: the connection that owns qp, closed at teardown
	outstanding atomic.Int64
	// On-demand connection (ondemand.go): lazy peers get ch on first use; ready is set after
	// ch (an atomic store: a reader that sees ready sees ch). odAddr is the peer's CM address.
	lazy   bool
	ready  atomic.Bool
	odAddr []byte
	done   func(*multirail.Request) // completion callback: outstanding--
	route  route                    // how operations reach this peer, chosen at connection (route.go)
	ctr    *peerCounters            // statistics, or nil when they are off (stats.go)
	pid    int                      // the peer's process id (host exchange)
	pidfd  int                      // node peers of another process: a pidfd of it (fenceNode), or -1
}

// Runtime is an initialized ARMCI job on this rank.
type Runtime struct {
	cfg   Config
	boot  Bootstrap
	rank  int
	size  int
	log   zerolog.Logger
	nets  []*network
	peers []*peer

	machineRanks int           // ranks on this machine (host ids equal but for the network namespace)
	spin         int           // polls a wait spins before it yields (spinBudget)
	stats        bool          // communication statistics are counted (stats.go)
	mappedFast   bool          // contiguous Put/Get may take the mapped fast path (mappedPart)
	syncWaitNS   atomic.Int64  // statistics: time in synchronization waits (barriers, fences, locks, notify)
	yields       int           // polls a wait yields between before it sleeps: pollYields, 0 on a given device (init.go)
	progress     []func() bool // the tcp devices' progress calls, made between a wait's yields (yieldUntil)
	// arrived wakes a wait parked in yieldUntil's last stage when a tcp device's reader has
	// delivered frames (onArrival; nil without tcp devices); parkers counts the parked waits.
	arrived chan struct{}
	parkers atomic.Int32
	// a wait's sleeps between polls, from pollSleep doubling to pollSleepMax: pollSleepFirst and
	// pollSleepLast, or Config.NetworkPoll for both on a given device (init.go)
	pollSleep, pollSleepMax time.Duration

	secret secret.Key // the job's: keys the tcp hellos and the CM's MACs (secret.go)

	odMu     sync.Mutex // on-demand connections: peers' lazy state, installOnDemand, teardown
	odClosed bool

	segMu   sync.Mutex
	nextSeg int
	live    map[int]*Segment

	sys        *Segment    // barrier flags and collective scratch
	reduce     reduceState // the collectives' state on the system segment's scratch (collective.go)
	barrierID  uint64
	barrierAlg BarrierAlg // Barrier's, chosen at Init (barrier_choice.go)
	node       nodeLayout // this rank's node and the nodes' leaders (BarrierHierarchical)
	sig        signals    // the barriers' signals to network peers in flight (signal.go)
	bq         *barrierQP // RGM's and BarrierMessage's UD queue pair, or nil (barrier_rgm.go)
	collStep   uint64     // collective steps so far: the scratch set of the next (collective.go)
	mutexes    *Segment
	notify     *Segment // word p of my part: notifies received from rank p (notify.go)
	notified   []int64  // per rank: notifies this rank sent to it
	awaited    []int64  // per rank: notifies from it this rank has waited for

	finalized atomic.Bool
	closers   []func() error
	fail      failures  // failed ranks (failure.go)
	ad        *adaptive // the adaptive transport's driver (GOARMCI_NET_TRANSPORT=adaptive), or nil
}

// network is one device with its multirail network.
type network struct {
	kind  Transport
	dev   *ibv.Context
	ep    *hybridft.Endpoint
	eps   []*hybridft.Endpoint // one per port (rail); eps[0] == ep
	net   *multirail.Network
	alloc func(int) ([]byte, func() error, error) // shareable memory for segments, or nil
	mgr   *hybridft.Manager                       // fault tolerance (network devices), or nil
	od    *hybridft.OnDemand                      // on-demand connection setup, or nil
	dcqps []*ibv.QP                               // the shared datagram path: a DC queue pair per rail (netpath.go), or none
	dceps []*hybridft.Endpoint                    // the endpoint of each of dcqps
}

// Rank is this process's rank (armci_msg_me).
func (r *Runtime) Rank() int { return r.rank }

// Size is the number of ranks (armci_msg_nproc).
func (r *Runtime) Size() int { return r.size }

// channel returns the multirail channel to network peer p, or nil for this rank itself, a bad
// rank, a peer of this node (reached over shared memory, without a channel), or a peer
// connected on demand that has not been used yet.
func (r *Runtime) channel(p int) *multirail.Channel {
	if p < 0 || p >= r.size || p == r.rank || r.peers == nil {
		return nil
	}
	pe := r.peers[p]
	if pe.lazy && !pe.ready.Load() {
		return nil
	}
	return pe.ch.Load()
}

// Logger is the runtime's logger.
func (r *Runtime) Logger() *zerolog.Logger { return &r.log }

// SameNode reports whether rank p shares this rank's node (and memory path).
func (r *Runtime) SameNode(p int) bool {
	if p < 0 || p >= r.size {
		return false
	}
	return p == r.rank || r.peers[p].local
}

// TransportTo names the transport used to reach rank p ("self", "shm" or "tcp").
func (r *Runtime) TransportTo(p int) string {
	if p == r.rank {
		return "self"
	}
	if p < 0 || p >= r.size {
		return ""
	}
	return string(r.nets[r.peers[p].net].kind)
}

func (r *Runtime) check() error {
	if r.finalized.Load() {
		return ErrFinalized
	}
	return nil
}

// peer is rank p's peer, checked for an operation of this rank on it: the rank, the runtime, p's
// failure and this rank's own (an expelled rank does nothing more: ErrExpelled), and, before a
// same-node peer's memory is written by this process itself, this rank's membership (checkMember).
func (r *Runtime) peer(ctx context.Context, p int) (*peer, error) {
	if r.finalized.Load() {
		return nil, ErrFinalized
	}
	if p < 0 || p >= r.size {
		return nil, fmt.Errorf("%w: rank %d of %d", ErrBadRank, p, r.size)
	}
	if err := r.failedErr(p); err != nil {
		return nil, err
	}
	if err := r.failedErr(r.rank); err != nil {
		return nil, err // this rank was expelled
	}
	pe := r.peers[p]
	if pe.qp != nil && r.fail.lease {
		if err := r.checkMember(ctx); err != nil {
			return nil, err
		}
	}
	return pe, nil
}

// machineOf is the machine part of a host id: hostID's hostname/boot id without the network
// namespace (ids of another shape, set by GOARMCI_HOST_ID or Config.HostID, are their own machine).
func machineOf(id string) string {
	if strings.Count(id, "/") >= 2 {
		return id[:strings.LastIndex(id, "/")]
	}
	return id
}

// hostID identifies this node: ranks with equal ids share memory. The network namespace is part
// of it, so ranks in different namespaces (the testbed's "hosts") talk through the network.
func hostID() string {
	if v := os.Getenv(config.EnvHostID); v != "" {
		return v
	}
	h, _ := os.Hostname()
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/net")
	return h + "/" + strings.TrimSpace(string(b)) + "/" + ns
}
