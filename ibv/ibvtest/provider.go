// Package ibvtest is the verbs conformance suite every ibv provider must pass (the RC and UD
// semantics of [IBA] ch. 9–11 as package ibv documents them), and the helpers other packages'
// tests use to set up queue pairs.
//
// A provider's test plugs the suite in with
//
//	func TestConformance(t *testing.T) { ibvtest.Run(t, ibvtest.Funcs{OpenFunc: ..., Capabilities: ...}) }
//
// The suite opens fresh devices in-process for every case, registers memory the provider
// allocates, and checks values: bytes moved, bytes left untouched, completion statuses and
// opcodes, QP and APM states, asynchronous events. What it checks is the verbs semantics of
// libibverbs and the IBA specification vol. 1 ch. 9–11 (QP states and transitions, responder
// memory access validation, flush on error; [Vishnu07 §2.2]), with the software extensions of this
// repository (LocalBuf, 32-bit and swap atomics, Accumulate).
package ibvtest

import (
	"testing"
	"time"

	"github.com/goarmci/goarmci/ibv"
)

// Provider is what the suite needs of a provider.
type Provider interface {
	// Open opens a fresh device in this process. It closes it with t.Cleanup. Devices opened by
	// one test must reach each other (same job, same network).
	Open(t testing.TB) *ibv.Context
	// Alloc returns n bytes of zeroed memory that may be registered as an MR and accessed
	// remotely (shared memory for shm, any Go memory for network providers). It frees the
	// memory with t.Cleanup if it must be freed.
	Alloc(t testing.TB, n int) []byte
	// Caps declares what the provider supports; the suite skips (with the reason) what it
	// does not.
	Caps() Caps
}

// Caps are a provider's declared capabilities.
type Caps struct {
	RC         bool // reliable connected QPs: RDMA write/read, atomics
	UD         bool // unreliable datagram QPs
	DC         bool // dynamically connected QPs (ibv.DC): RDMA and atomics to any peer
	SendRecv   bool // two-sided send/receive (RC; and UD when UD is set)
	Atomics    bool // the verbs atomics and the 32-bit/swap extensions
	Accumulate bool // OpAccumulate
	// APM: the provider loads alternate paths (REARM→ARMED via provider.SetArmed), so manual and
	// automatic migration can be tested.
	APM bool
	// MaxMsgSize is the largest RC message, bytes; 0: DeviceAttr.MaxMsgSize.
	MaxMsgSize uint64
	// UDMTU is the largest UD payload, bytes; 0: PortAttr.MTU of Port.
	UDMTU int
	// Port is the port the suite uses (1-based); 0: 1.
	Port uint8
}

// Funcs is a Provider made of functions: OpenFunc is required; AllocFunc defaults to make.
type Funcs struct {
	OpenFunc     func(t testing.TB) *ibv.Context
	AllocFunc    func(n int) ([]byte, error)
	FreeFunc     func(b []byte) error // optional, called at cleanup for AllocFunc memory
	Capabilities Caps
}

// Open implements Provider.
func (f Funcs) Open(t testing.TB) *ibv.Context {
	t.Helper()
	return f.OpenFunc(t)
}

// Alloc implements Provider.
func (f Funcs) Alloc(t testing.TB, n int) []byte {
	t.Helper()
	if f.AllocFunc == nil {
		return make([]byte, n)
	}
	b, err := f.AllocFunc(n)
	if err != nil {
		t.Fatalf("ibvtest: Alloc(%d): %v", n, err)
	}
	if len(b) < n {
		t.Fatalf("ibvtest: Alloc(%d) returned %d bytes", n, len(b))
	}
	if f.FreeFunc != nil {
		t.Cleanup(func() {
			if err := f.FreeFunc(b); err != nil {
				t.Errorf("ibvtest: free: %v", err)
			}
		})
	}
	return b[:n:n]
}

// Caps implements Provider.
func (f Funcs) Caps() Caps { return f.Capabilities }

// HangGuard bounds every blocking wait of the suite and its helpers, so that a lost completion
// fails the test instead of hanging the test binary. It is not a timing assertion: a correct
// provider completes everything the suite waits for far sooner on any machine.
var HangGuard = 60 * time.Second

func port(p Provider) uint8 {
	if n := p.Caps().Port; n != 0 {
		return n
	}
	return 1
}
