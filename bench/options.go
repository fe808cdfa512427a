package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Errors returned by Options.Check and Run; test them with errors.Is.
var (
	// ErrUnknown: no benchmark of that name.
	ErrUnknown = errors.New("bench: unknown benchmark")
	// ErrSync: the synchronization mode does not exist or the benchmark cannot use it.
	ErrSync = errors.New("bench: unsupported synchronization mode")
	// ErrOptions: a size, count or window out of range.
	ErrOptions = errors.New("bench: bad options")
	// ErrRanks: the benchmark needs more ranks than the job has.
	ErrRanks = errors.New("bench: too few ranks")
	// ErrUnsupported: the runtime has no operation to express the benchmark (yet).
	ErrUnsupported = errors.New("bench: not supported by this runtime")
)

// Sync is how an origin closes an access epoch in a one-sided benchmark (osu_* -s).
type Sync string

const (
	// SyncFlush: passive target; each operation (latency) or window of operations (bandwidth)
	// is completed at the target by ARMCI_Fence (MPI_Win_flush).
	SyncFlush Sync = "flush"
	// SyncLock: passive target; each epoch is bracketed by ARMCI_Lock/ARMCI_Unlock of mutex 0 at
	// the target (MPI_Win_lock/MPI_Win_unlock), the operations completed by ARMCI_Fence before
	// the unlock.
	SyncLock Sync = "lock"
	// SyncFence: active target; both ranks close each epoch with ARMCI_Barrier = AllFence +
	// barrier (MPI_Win_fence, collective). Latency tests become a ping-pong as in OSU.
	SyncFence Sync = "fence"
	// SyncPSCW: general active target (MPI_Win_post/start/complete/wait); window API only (the
	// ARMCI calls have no groups to post to: ErrSync).
	SyncPSCW Sync = "pscw"
)

// Kind says what a benchmark's figure is.
type Kind int

const (
	Latency   Kind = iota // µs per operation
	Bandwidth             // MB/s, 10^6 bytes per second
	Flops                 // GFLOP/s, 10^9 floating-point operations per second; the key is n
)

// Spec describes one benchmark.
type Spec struct {
	Name  string
	Title string // OSU header, "# OSU MPI_Put Latency Test"
	Kind  Kind
	// syncs the benchmark accepts, the first is its default.
	syncs []Sync
	// MinSize/MaxSize bound the sizes (bytes); equal for single-size tests (fetch-and-op).
	MinSize, MaxSize int
	// Ranks is the minimum job size.
	Ranks int
	// note is printed as a header comment (what the goarmci definition maps to).
	note string
}

// maxMessage is OSU's largest message, 4 MiB.
const maxMessage = 4 << 20

// largeMessage is OSU's LARGE_MESSAGE_SIZE: above it, the large iteration counts apply.
const largeMessage = 8192

// OSU iteration rules (osu_util.h): latency 10000/100 small, 1000/10 large; bandwidth 100/10
// small, 20/2 large; window 64.
const (
	latLoopSmall, latSkipSmall = 10000, 100
	latLoopLarge, latSkipLarge = 1000, 10
	bwLoopSmall, bwSkipSmall   = 100, 10
	bwLoopLarge, bwSkipLarge   = 20, 2
	// flopsLoop, flopsSkip: the products timed and the untimed first ones of a Flops benchmark.
	flopsLoop, flopsSkip = 3, 1
	// DefaultWindow is the number of operations per synchronization in bandwidth tests.
	DefaultWindow = 64
)

var specs = []Spec{
	{Name: "put_latency", Title: "# OSU MPI_Put Latency Test", Kind: Latency, syncs: []Sync{SyncFlush, SyncLock, SyncFence, SyncPSCW}, MinSize: 1, MaxSize: maxMessage, Ranks: 2,
		note: "ARMCI_Put (returns when the data is at the target)"},
	{Name: "get_latency", Title: "# OSU MPI_Get Latency Test", Kind: Latency, syncs: []Sync{SyncFlush, SyncLock, SyncFence, SyncPSCW}, MinSize: 1, MaxSize: maxMessage, Ranks: 2,
		note: "ARMCI_Get"},
	{Name: "put_bw", Title: "# OSU MPI_Put Bandwidth Test", Kind: Bandwidth, syncs: []Sync{SyncFlush, SyncLock, SyncFence, SyncPSCW}, MinSize: 1, MaxSize: maxMessage, Ranks: 2,
		note: "ARMCI_NbPut x window"},
	{Name: "get_bw", Title: "# OSU MPI_Get Bandwidth Test", Kind: Bandwidth, syncs: []Sync{SyncFlush, SyncLock, SyncFence, SyncPSCW}, MinSize: 1, MaxSize: maxMessage, Ranks: 2,
		note: "ARMCI_NbGet x window"},
	{Name: "put_bibw", Title: "# OSU MPI_Put Bi-directional Bandwidth Test", Kind: Bandwidth, syncs: []Sync{SyncFence, SyncFlush, SyncPSCW}, MinSize: 1, MaxSize: maxMessage, Ranks: 2,
		note: "ARMCI_NbPut x window from both ranks"},
	{Name: "acc_latency", Title: "# OSU MPI_Accumulate latency Test", Kind: Latency, syncs: []Sync{SyncFlush, SyncLock, SyncFence, SyncPSCW}, MinSize: 8, MaxSize: maxMessage, Ranks: 2,
		note: "ARMCI_Acc of float64 elements, scale 1 (MPI_DOUBLE, MPI_SUM)"},
	{Name: "fop_latency", Title: "# OSU MPI_Fetch_and_op latency Test", Kind: Latency, syncs: []Sync{SyncFlush, SyncLock, SyncFence, SyncPSCW}, MinSize: 8, MaxSize: 8, Ranks: 2,
		note: "ARMCI_Rmw FETCH_AND_ADD_LONG (MPI_LONG_LONG, MPI_SUM)"},
	{Name: "cas_latency", Title: "# OSU MPI_Compare_and_swap latency Test", Kind: Latency, syncs: []Sync{SyncFlush, SyncLock, SyncFence, SyncPSCW}, MinSize: 8, MaxSize: 8, Ranks: 2,
		note: "rma CompareSwap, 64-bit (MPI_LONG_LONG)"},
	{Name: "get_acc_latency", Title: "# OSU MPI_Get_accumulate latency Test", Kind: Latency, syncs: []Sync{SyncFlush, SyncLock, SyncFence, SyncPSCW}, MinSize: 8, MaxSize: maxMessage, Ranks: 2,
		note: "MPI_Get_accumulate (window API only: rma has no fetching accumulate of a buffer)"},
	{Name: "ga_put", Title: "# GA NGA_Put Latency Test", Kind: Latency, syncs: []Sync{SyncFlush}, MinSize: 8, MaxSize: maxMessage, Ranks: 2,
		note: "NGA_Put of a square-ish 2-D float64 patch owned by rank 1"},
	{Name: "ga_get", Title: "# GA NGA_Get Latency Test", Kind: Latency, syncs: []Sync{SyncFlush}, MinSize: 8, MaxSize: maxMessage, Ranks: 2,
		note: "NGA_Get of a square-ish 2-D float64 patch owned by rank 1"},
	{Name: "ga_acc", Title: "# GA NGA_Acc Latency Test", Kind: Latency, syncs: []Sync{SyncFlush}, MinSize: 8, MaxSize: maxMessage, Ranks: 2,
		note: "NGA_Acc (alpha 1) of a square-ish 2-D float64 patch owned by rank 1"},
	{Name: "ga_read_inc", Title: "# GA NGA_Read_inc Latency Test", Kind: Latency, syncs: []Sync{SyncFlush}, MinSize: 8, MaxSize: 8, Ranks: 2,
		note: "NGA_Read_inc of an int64 element owned by rank 1"},
	{Name: "ga_sync", Title: "# GA GA_Sync Latency Test", Kind: Latency, syncs: []Sync{SyncFence}, MinSize: 0, MaxSize: 0, Ranks: 1,
		note: "GA_Sync (AllFence + barrier) on all ranks"},
	{Name: "ga_dgemm", Title: "# GA GA_Dgemm Test", Kind: Flops, syncs: []Sync{SyncFence}, MinSize: 64, MaxSize: 2048, Ranks: 1,
		note: "GA_Dgemm('N', 'N') of n×n float64 arrays (globalarray.Gemm), 2n³ flops per product, between GA_Syncs"},
	{Name: "allreduce", Title: "# OSU MPI_Allreduce Latency Test", Kind: Latency, syncs: []Sync{SyncFence}, MinSize: 8, MaxSize: 1 << 20, Ranks: 1,
		note: "GA_Dgop \"+\" of float64 elements on all ranks (globalarray.GopSum: rma.AllReduce, armci_msg_dgop)"},
	{Name: "barrier", Title: "# OSU-style Barrier Latency Test", Kind: Latency, syncs: []Sync{SyncFence}, MinSize: 0, MaxSize: 0, Ranks: 1,
		note: "ARMCI_Barrier per algorithm; the size column is the number of ranks"},
}

// Collective reports whether the benchmark runs on every rank of the job alike, with no origin
// and target (barrier, ga_sync, ga_dgemm, allreduce: the ones whose minimum job size is 1): it
// has no synchronization mode to choose and no baseline columns between two ranks.
func (s Spec) Collective() bool { return s.Ranks == 1 }

// GASuite lists the benchmarks `ga` runs.
var GASuite = []string{"ga_put", "ga_get", "ga_acc", "ga_read_inc", "ga_sync", "ga_dgemm"}

// Specs returns every benchmark, in listing order.
func Specs() []Spec { return slices.Clone(specs) }

// Lookup returns the benchmark named name.
func Lookup(name string) (Spec, error) {
	for _, s := range specs {
		if s.Name == name {
			return s, nil
		}
	}
	return Spec{}, fmt.Errorf("%w %q (have %s)", ErrUnknown, name, strings.Join(Names(), ", "))
}

// Names lists the benchmark names.
func Names() []string {
	n := make([]string, len(specs))
	for i, s := range specs {
		n[i] = s.Name
	}
	return n
}

// Options select one run of a benchmark. Zero values take the OSU defaults.
type Options struct {
	Name string
	Sync Sync // "" = the benchmark's default
	// MinSize, MaxSize bound the message sizes in bytes (powers of two from MinSize); 0 = the
	// benchmark's range.
	MinSize, MaxSize int
	// Iterations and Skip, when > 0, replace the OSU counts for every size.
	Iterations, Skip int
	// Settle is how long every goarmci rank spins, after a barrier and before the warm-up of each
	// size, so that the measurement starts in the steady state of a busy Go process (settleRanks);
	// 0: none. The C peers need none and get none.
	Settle time.Duration
	// Window is the number of operations per synchronization in bandwidth tests (default 64).
	Window int
	// Baseline adds the physical-limit columns (memcpy, TCP socket) beside the results.
	Baseline bool
	// BarrierAlg selects the barrier algorithms of "barrier" ("" or "all" = every one).
	BarrierAlg string
	// API runs the one-sided benchmarks on ARMCI calls (APIARMCI, "" = default) or on MPI-3
	// windows (APIWindow, which also has pscw and get_acc_latency).
	API string
	// Win is the window creation of APIWindow: "allocate" (default, MPI_Win_allocate) or
	// "create" (MPI_Win_create over an ARMCI_Malloc'd segment).
	Win string
}

// Check validates o against its benchmark and fills the defaults; it returns the completed
// options and the benchmark's Spec.
func (o Options) Check() (Options, Spec, error) {
	s, err := Lookup(o.Name)
	if err != nil {
		return o, s, err
	}
	if o.Sync == "" {
		o.Sync = s.syncs[0]
	}
	if !slices.Contains(s.syncs, o.Sync) {
		return o, s, fmt.Errorf("%w: %s with -sync %q (have %v)", ErrSync, s.Name, o.Sync, s.syncs)
	}
	if o.MinSize == 0 {
		o.MinSize = s.MinSize
	}
	if o.MaxSize == 0 {
		o.MaxSize = s.MaxSize
	}
	o.MinSize = max(o.MinSize, s.MinSize)
	o.MaxSize = min(o.MaxSize, s.MaxSize)
	if o.MinSize < 0 || o.MaxSize < o.MinSize {
		return o, s, fmt.Errorf("%w: sizes %d..%d for %s (allowed %d..%d)", ErrOptions, o.MinSize, o.MaxSize, s.Name, s.MinSize, s.MaxSize)
	}
	if o.Iterations < 0 || o.Skip < 0 || o.Window < 0 || o.Settle < 0 {
		return o, s, fmt.Errorf("%w: negative iterations, skip, settle or window", ErrOptions)
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	switch o.API {
	case "":
		o.API = APIARMCI
	case APIARMCI, APIWindow:
	default:
		return o, s, fmt.Errorf("%w: api %q (want armci or window)", ErrOptions, o.API)
	}
	switch o.Win {
	case "":
		o.Win = "allocate"
	case "allocate", "create":
	default:
		return o, s, fmt.Errorf("%w: window creation %q (want allocate or create)", ErrOptions, o.Win)
	}
	return o, s, nil
}

// Sizes returns the message sizes of a run: powers of two from MinSize to MaxSize (a single
// size when they are equal; 0 stays 0).
func (o Options) Sizes() []int {
	if o.MaxSize == o.MinSize {
		return []int{o.MinSize}
	}
	var out []int
	for s := 1; s <= o.MaxSize; s *= 2 {
		if s >= o.MinSize {
			out = append(out, s)
		}
	}
	return out
}

// Counts returns (iterations, skip) for one message size under the OSU rules (3 timed after 1
// untimed for Flops), or the explicit Iterations/Skip.
func (o Options) Counts(k Kind, size int) (iters, skip int) {
	large := size > largeMessage
	switch {
	case k == Flops:
		iters, skip = flopsLoop, flopsSkip
	case k == Bandwidth && large:
		iters, skip = bwLoopLarge, bwSkipLarge
	case k == Bandwidth:
		iters, skip = bwLoopSmall, bwSkipSmall
	case large:
		iters, skip = latLoopLarge, latSkipLarge
	default:
		iters, skip = latLoopSmall, latSkipSmall
	}
	if o.Iterations > 0 {
		iters = o.Iterations
		skip = min(skip, max(1, iters/10))
	}
	if o.Skip > 0 {
		skip = o.Skip
	}
	return iters, skip
}
