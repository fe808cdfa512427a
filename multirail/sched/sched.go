// Package sched holds the multi-rail communication scheduler's policies [Vishnu07 ch. 4–8]: given
// one operation it returns the stripes — (subchannel, offset, length) — that carry it, and it is
// fed back the completion of every stripe (bytes, delivery time) for the adaptive policies.
//
// Every policy is a pure state machine: no goroutine, no clock, no locking. Time arrives as an
// argument (Done.Delivery). A Policy is not safe for concurrent use; its owner (a
// multirail.Channel) serializes the calls.
//
// Policies, by name (New, Parse):
//
//	binding[:s]        one subchannel for everything (§4.1.2)
//	round-robin | rr   one subchannel per operation, in turn (§4.1.2)
//	window[:W]         window-based round robin: W consecutive operations per subchannel (§4.1.2)
//	even               even striping above the threshold, multiplexed below (§4.1.2, §4.3.2)
//	weighted[:w1:w2…]  weighted striping with static weights (§4.1.2)
//	adaptive[:α]       adaptive striping, eq. 7.1–7.4 (ch. 7); the same as hsam
//	hsam[:α]           BSS with n_batch = n_paths (§8.4)
//	bss[:n_batch[:α]]  batch based striping and sorting, eq. 8.1–8.3 (ch. 8)
//	epc                striping for blocking and collective, round robin for non-blocking (ch. 6)
//	fragment | lbf     load-balanced fragmentation with put and get load queues (§5.2.2–5.2.3)
//	auto               adaptive (HSAM, eq. 7.4, α = DefaultAlpha) over every subchannel: the default
//
// The striping policies (even, weighted, adaptive, hsam, bss, epc, fragment) send operations
// below the threshold, atomics and EPC's non-blocking operations whole, multiplexed: on the
// subchannel of the previous operation while it has nothing in flight, else on the least busy
// one, round robin on ties (mux.go). A latency-bound origin thus keeps one warm queue pair, as
// binding does, and a burst of non-blocking operations spreads as round robin does. binding,
// round-robin and window are the plain multiplexing policies of §4.1.2, unchanged.
package sched

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind is an operation's kind.
type Kind uint8

const (
	// Put is an RDMA write (data flows origin → target).
	Put Kind = iota
	// Get is an RDMA read (data flows target → origin).
	Get
	// Acc is an accumulate (data flows origin → target; atomic per element).
	Acc
	// Atomic is a fetch-and-op or swap: never striped.
	Atomic
)

func (k Kind) String() string {
	switch k {
	case Put:
		return "put"
	case Get:
		return "get"
	case Acc:
		return "acc"
	case Atomic:
		return "atomic"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Op describes one operation to schedule.
type Op struct {
	Kind Kind
	// Size in bytes (> 0).
	Size int
	// Align: stripe boundaries fall on multiples of Align bytes from the operation's start (the
	// element size of an accumulate, so every element stays in one stripe); 0 or 1: any byte.
	Align int
	// Blocking: the origin waits for this operation before issuing the next [Vishnu07 §6.2.1].
	Blocking bool
	// Collective: the operation is a step of a collective [Vishnu07 §6.2.2].
	Collective bool
	// Pinned forces the whole operation onto subchannel Sub (the channel uses it to keep an
	// operation behind an overlapping one in flight on that subchannel). Policies still account
	// for it (loads, round-robin position is not advanced).
	Pinned bool
	Sub    int
}

// Stripe is one piece of an operation: Len bytes at byte offset Off of the operation, carried by
// subchannel Sub.
type Stripe struct {
	Sub int
	Off int
	Len int
}

// Done is the completion of one stripe: its subchannel, its bytes and its delivery time (from
// hand-over to the transport to the completion's discovery, [Vishnu07 §7.1.2]); Delivery 0 means
// "not measured".
type Done struct {
	Sub      int
	Bytes    int
	Delivery time.Duration
}

// Policy is a scheduling policy for a channel of a fixed number of subchannels.
type Policy interface {
	// Name is the policy's name as Parse accepts it (with its parameters).
	Name() string
	// Schedule appends op's stripes to dst and returns it. The stripes are disjoint, in offset
	// order, cover [0, op.Size) exactly, and name distinct subchannels.
	Schedule(op Op, dst []Stripe) []Stripe
	// Complete feeds back the completion of all stripes of one operation scheduled by Schedule.
	Complete(op Op, done []Done)
	// Feedback reports whether the policy uses delivery times (the caller may skip the clock).
	Feedback() bool
}

// MaxSubchannels bounds a channel's subchannels (rails × paths).
const MaxSubchannels = 64

// DefaultThreshold is the default switchover threshold in bytes: below it operations are not
// striped ([Vishnu07 §5.2.3]; 16 KiB as the rendezvous/striping threshold of §6.2.3).
const DefaultThreshold = 16 << 10

// DefaultAlpha is the default history factor α of eq. 7.4 and 8.3: high, for fast convergence
// [Vishnu07 §8.2.1].
const DefaultAlpha = 0.5

// Grain is the default stripe granularity in bytes: stripes start on multiples of it (one cache
// line; every accumulate element size divides it).
const Grain = 64

// Config parameterizes New.
type Config struct {
	// Subchannels is the channel's number of subchannels (1..MaxSubchannels).
	Subchannels int
	// Threshold is the switchover threshold in bytes (0: DefaultThreshold): operations smaller
	// than it are multiplexed, not striped [Vishnu07 §5.2.3].
	Threshold int
	// Alpha is α of eq. 7.4 / 8.3 (0: DefaultAlpha).
	Alpha float64
	// Batch is BSS's n_batch (0: half the subchannels, at least 1).
	Batch int
	// Window is W of window-based round robin (0: 4).
	Window int
	// Bind is the subchannel of the binding policy (taken modulo Subchannels).
	Bind int
	// Weights are the weighted policy's static weights, one per subchannel (nil: equal).
	Weights []float64
	// MinShare is the smallest share of the total weight an adaptive path keeps, so a path that
	// recovers can be measured again (0: 1%; our addition to eq. 7.4).
	MinShare float64
}

// Errors.
var (
	// ErrUnknownPolicy: a policy name Parse does not know.
	ErrUnknownPolicy = errors.New("sched: unknown policy")
	// ErrBadConfig: a parameter out of range.
	ErrBadConfig = errors.New("sched: bad policy configuration")
)

// Names lists the policy names New accepts.
func Names() []string {
	return []string{"auto", "binding", "round-robin", "window", "even", "weighted", "adaptive", "hsam", "bss", "epc", "fragment"}
}

// Parse splits a policy spec "name[:p1[:p2…]]" (GOARMCI_STRIPE_POLICY) into the name and
// parameters applied to cfg: binding:s, window:W, weighted:w1:w2…, adaptive:α, hsam:α,
// bss:n_batch[:α]. Errors wrap ErrUnknownPolicy or ErrBadConfig.
func Parse(spec string, cfg Config) (string, Config, error) {
	parts := strings.Split(strings.ToLower(strings.TrimSpace(spec)), ":")
	name, args := canonical(parts[0]), parts[1:]
	if name == "" {
		return "", cfg, fmt.Errorf("%w: %q", ErrUnknownPolicy, spec)
	}
	bad := func(what string) error { return fmt.Errorf("%w: %q: %s", ErrBadConfig, spec, what) }
	atoi := func(s string) (int, error) {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return 0, bad("want a non-negative integer, got " + s)
		}
		return v, nil
	}
	atof := func(s string) (float64, error) {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(v > 0) {
			return 0, bad("want a positive number, got " + s)
		}
		return v, nil
	}
	var err error
	switch name {
	case "binding":
		if len(args) > 1 {
			return "", cfg, bad("binding takes one subchannel")
		}
		if len(args) == 1 {
			cfg.Bind, err = atoi(args[0])
		}
	case "window":
		if len(args) > 1 {
			return "", cfg, bad("window takes W")
		}
		if len(args) == 1 {
			cfg.Window, err = atoi(args[0])
		}
	case "weighted":
		cfg.Weights = nil
		for _, a := range args {
			var w float64
			if w, err = atof(a); err != nil {
				break
			}
			cfg.Weights = append(cfg.Weights, w)
		}
	case "adaptive", "hsam":
		if len(args) > 1 {
			return "", cfg, bad(name + " takes α")
		}
		if len(args) == 1 {
			cfg.Alpha, err = atof(args[0])
		}
	case "bss":
		if len(args) > 2 {
			return "", cfg, bad("bss takes n_batch and α")
		}
		if len(args) >= 1 {
			cfg.Batch, err = atoi(args[0])
		}
		if err == nil && len(args) == 2 {
			cfg.Alpha, err = atof(args[1])
		}
	default:
		if len(args) > 0 {
			return "", cfg, bad(name + " takes no parameters")
		}
	}
	if err != nil {
		return "", cfg, err
	}
	return name, cfg, nil
}

func canonical(n string) string {
	switch n {
	case "auto", "binding", "window", "even", "weighted", "adaptive", "hsam", "bss", "epc", "fragment":
		return n
	case "round-robin", "roundrobin", "rr":
		return "round-robin"
	case "wrr", "window-rr":
		return "window"
	case "lbf", "load-balanced", "fragmentation":
		return "fragment"
	case "bind":
		return "binding"
	case "striping", "even-striping":
		return "even"
	}
	return ""
}

// New builds the policy named by spec (see Parse) for cfg.Subchannels subchannels. Errors wrap
// ErrUnknownPolicy or ErrBadConfig.
func New(spec string, cfg Config) (Policy, error) {
	name, cfg, err := Parse(spec, cfg)
	if err != nil {
		return nil, err
	}
	n := cfg.Subchannels
	if n < 1 || n > MaxSubchannels {
		return nil, fmt.Errorf("%w: %d subchannels", ErrBadConfig, n)
	}
	if cfg.Threshold < 0 || cfg.Alpha < 0 || cfg.Alpha > 1 || cfg.Window < 0 || cfg.Batch < 0 || cfg.Batch > n ||
		cfg.MinShare < 0 || cfg.MinShare*float64(n) >= 1 {
		return nil, fmt.Errorf("%w: %+v", ErrBadConfig, cfg)
	}
	if cfg.Threshold == 0 {
		cfg.Threshold = DefaultThreshold
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = DefaultAlpha
	}
	if cfg.Window == 0 {
		cfg.Window = 4
	}
	if cfg.MinShare == 0 {
		cfg.MinShare = 0.01
	}
	switch name {
	case "binding":
		return NewBinding(n, cfg.Bind), nil
	case "round-robin":
		return NewRoundRobin(n), nil
	case "window":
		return NewWindow(n, cfg.Window), nil
	case "even":
		return NewEven(n, cfg.Threshold), nil
	case "weighted":
		if cfg.Weights == nil {
			cfg.Weights = equalWeights(n)
		}
		return NewWeighted(cfg.Weights, cfg.Threshold)
	case "adaptive", "hsam":
		p, err := NewBSS(n, n, cfg.Alpha, cfg.Threshold, cfg.MinShare)
		if err == nil {
			p.name = fmt.Sprintf("%s:%g", name, cfg.Alpha)
		}
		return p, err
	case "bss":
		b := cfg.Batch
		if b == 0 {
			b = max(1, n/2)
		}
		return NewBSS(n, b, cfg.Alpha, cfg.Threshold, cfg.MinShare)
	case "epc":
		return NewEPC(n, cfg.Threshold), nil
	case "fragment":
		return NewFragment(n, cfg.Threshold), nil
	case "auto":
		// Adaptive striping over every path: the policy that keeps the rate when a path turns
		// into a hot spot (bench/SCENARIOS.md, "Hot spots on a simulated fat tree"; on the
		// testbed, bench hotspot: adaptive 95 % of the new summed rate, fragment and even 17 %).
		p, err := NewBSS(n, n, cfg.Alpha, cfg.Threshold, cfg.MinShare)
		if err == nil {
			p.name = fmt.Sprintf("adaptive:%g", cfg.Alpha)
		}
		return p, err
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownPolicy, spec)
}

func equalWeights(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1
	}
	return w
}

// grainOf is the stripe granularity for op: a multiple of Grain and of op.Align.
func grainOf(op Op) int {
	a := max(op.Align, 1)
	g := Grain
	for g%a != 0 {
		g += Grain
	}
	return g
}

// single is the whole operation on one subchannel.
func single(dst []Stripe, op Op, sub int) []Stripe {
	return append(dst, Stripe{Sub: sub, Off: 0, Len: op.Size})
}

// split appends op's stripes over subs, with lengths proportional to share[k] (for subs[k]),
// rounded to the operation's grain; the rounding remainder goes to the subchannel with the
// largest share. Subchannels whose share rounds to zero carry nothing. share must be ≥ 0 with a
// positive sum.
func split(dst []Stripe, op Op, subs []int, share []float64) []Stripe {
	g := grainOf(op)
	var total float64
	best := 0
	for k, s := range share {
		total += s
		if s > share[best] {
			best = k
		}
	}
	if total <= 0 || len(subs) == 0 {
		return single(dst, op, 0)
	}
	var lens [MaxSubchannels]int
	left := op.Size
	for k, s := range share {
		l := int(float64(op.Size)*s/total) / g * g
		l = min(l, left)
		lens[k] = l
		left -= l
	}
	lens[best] += left
	off := 0
	for k := range subs {
		if lens[k] > 0 {
			dst = append(dst, Stripe{Sub: subs[k], Off: off, Len: lens[k]})
			off += lens[k]
		}
	}
	return dst
}
