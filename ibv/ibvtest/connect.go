package ibvtest

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/goarmci/goarmci/ibv"
)

// RCOptions tunes ConnectRCWith; the zero value gives the usual queue pairs.
type RCOptions struct {
	// PDA and PDB are the protection domains of the two QPs; nil allocates a new one.
	PDA, PDB *ibv.PD
	// AccessA and AccessB are the remote access flags of the QPs (AttrAccessFlags, checked by
	// the responder together with the MR's flags); nil means AccessAll.
	AccessA, AccessB *ibv.Access
	// Port is the local port of both QPs (1-based); 0: 1.
	Port uint8
	// CQE is the size of each CQ; 0: 4096.
	CQE int
	// Cap is the QP capacity (zero fields take the ibv defaults).
	Cap ibv.QPCap
	// SigAll makes every send request signaled.
	SigAll bool
	// PSNA and PSNB are the first send PSNs of the QPs; zero picks fixed distinct values.
	PSNA, PSNB uint32
}

// ConnectRCWith creates, on devices a and b (which may be the same), one RC queue pair each, with
// a new PD, a send CQ and a receive CQ per QP, and connects them: RESET→INIT→RTR→RTS with each
// other's QP number, port address (PortAttr.Addr, LID) and PSNs, as an out-of-band exchange
// would. The QPs are destroyed at cleanup. Use qa.PD(), qa.SendCQ(), qa.RecvCQ() for the rest.
func ConnectRCWith(t testing.TB, a, b *ibv.Context, o RCOptions) (qa, qb *ibv.QP) {
	t.Helper()
	if o.Port == 0 {
		o.Port = 1
	}
	if o.CQE == 0 {
		o.CQE = 4096
	}
	if o.PSNA == 0 {
		o.PSNA = 0x1000
	}
	if o.PSNB == 0 {
		o.PSNB = 0x2000
	}
	all := ibv.AccessAll
	if o.AccessA == nil {
		o.AccessA = &all
	}
	if o.AccessB == nil {
		o.AccessB = &all
	}
	qa = CreateQP(t, a, o.PDA, ibv.RC, o.CQE, o.Cap, o.SigAll)
	qb = CreateQP(t, b, o.PDB, ibv.RC, o.CQE, o.Cap, o.SigAll)
	pa := QueryPort(t, a, o.Port)
	pb := QueryPort(t, b, o.Port)
	must(t, "INIT a", ModifyToInit(qa, o.Port, *o.AccessA, 0))
	must(t, "INIT b", ModifyToInit(qb, o.Port, *o.AccessB, 0))
	must(t, "RTR a", ModifyToRTR(qa, PathTo(pb, o.Port), qb.Num(), o.PSNB))
	must(t, "RTR b", ModifyToRTR(qb, PathTo(pa, o.Port), qa.Num(), o.PSNA))
	must(t, "RTS a", ModifyToRTS(qa, o.PSNA))
	must(t, "RTS b", ModifyToRTS(qb, o.PSNB))
	return qa, qb
}

// CreateQP creates a QP of type typ on c with its own send and receive CQs of cqe entries, in pd
// (nil: a new PD). It is destroyed at cleanup.
func CreateQP(t testing.TB, c *ibv.Context, pd *ibv.PD, typ ibv.QPType, cqe int, cp ibv.QPCap, sigAll bool) *ibv.QP {
	t.Helper()
	if pd == nil {
		var err error
		pd, err = c.AllocPD()
		must(t, "AllocPD", err)
	}
	scq, err := c.CreateCQ(cqe)
	must(t, "CreateCQ", err)
	rcq, err := c.CreateCQ(cqe)
	must(t, "CreateCQ", err)
	qp, err := pd.CreateQP(ibv.QPInitAttr{Type: typ, SendCQ: scq, RecvCQ: rcq, Cap: cp, SigAll: sigAll})
	must(t, "CreateQP", err)
	t.Cleanup(func() { _ = qp.Destroy() })
	return qp
}

// QueryPort returns port num of c.
func QueryPort(t testing.TB, c *ibv.Context, num uint8) ibv.PortAttr {
	t.Helper()
	pa, err := c.QueryPort(num)
	must(t, "QueryPort", err)
	if pa.Addr == "" {
		t.Fatalf("ibvtest: port %d of %s has no address", num, c.QueryDevice().Name)
	}
	return pa
}

// PathTo is the address vector of the remote port pa, sent from local port local.
func PathTo(pa ibv.PortAttr, local uint8) ibv.AHAttr {
	return ibv.AHAttr{Addr: pa.Addr, DLID: pa.LID, PortNum: local}
}

// ModifyToInit moves a RESET QP to INIT: port, remote access (RC) or Q_Key (UD).
func ModifyToInit(qp *ibv.QP, port uint8, access ibv.Access, qkey uint32) error {
	attr := &ibv.QPAttr{State: ibv.StateInit, PortNum: port, AccessFlags: access, QKey: qkey}
	mask := ibv.AttrState | ibv.AttrPort
	if qp.Type() == ibv.RC {
		mask |= ibv.AttrAccessFlags
	} else {
		mask |= ibv.AttrQKey
	}
	return qp.Modify(attr, mask)
}

// ModifyToRTR moves an INIT QP to RTR; for RC with the destination path, QP number and the
// expected PSN of the first incoming request (the peer's send PSN).
func ModifyToRTR(qp *ibv.QP, av ibv.AHAttr, destQPN, rqPSN uint32) error {
	if qp.Type() == ibv.UD {
		return qp.Modify(&ibv.QPAttr{State: ibv.StateRTR}, ibv.AttrState)
	}
	return qp.Modify(&ibv.QPAttr{State: ibv.StateRTR, AV: av, DestQPN: destQPN, RQPSN: rqPSN},
		ibv.AttrState|ibv.AttrAV|ibv.AttrDestQPN|ibv.AttrRQPSN)
}

// ModifyToRTS moves an RTR QP to RTS with first send PSN sqPSN.
func ModifyToRTS(qp *ibv.QP, sqPSN uint32) error {
	return qp.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: sqPSN}, ibv.AttrState|ibv.AttrSQPSN)
}

// ConnectUD creates a UD QP on c with Q_Key qkey and brings it to RTS.
func ConnectUD(t testing.TB, c *ibv.Context, port uint8, qkey uint32) *ibv.QP {
	t.Helper()
	qp := CreateQP(t, c, nil, ibv.UD, 4096, ibv.QPCap{}, false)
	must(t, "UD INIT", ModifyToInit(qp, port, 0, qkey))
	must(t, "UD RTR", ModifyToRTR(qp, ibv.AHAttr{}, 0, 0))
	must(t, "UD RTS", ModifyToRTS(qp, 0x3000))
	return qp
}

// WaitWC returns the next completion of cq, failing the test if none arrives within HangGuard
// or the device is closed. Call it from the test's goroutine.
func WaitWC(t testing.TB, cq *ibv.CQ) ibv.WC {
	t.Helper()
	wc, err := NextWC(cq)
	if err != nil {
		t.Fatalf("ibvtest: WaitWC: %v", err)
	}
	return wc
}

// NextWC is WaitWC for other goroutines: it returns an error instead of failing the test.
func NextWC(cq *ibv.CQ) (ibv.WC, error) {
	ctx, cancel := context.WithTimeout(context.Background(), HangGuard)
	defer cancel()
	var wc [1]ibv.WC
	for {
		if cq.Poll(wc[:]) == 1 {
			return wc[0], nil
		}
		if err := cq.Wait(ctx); err != nil {
			return ibv.WC{}, fmt.Errorf("no completion: %w", err)
		}
	}
}

// WaitOK waits for the next completion of cq and fails the test unless it is a success with
// work request id wrid.
func WaitOK(t testing.TB, cq *ibv.CQ, wrid uint64) ibv.WC {
	t.Helper()
	wc := WaitWC(t, cq)
	if wc.Status != ibv.WCSuccess || wc.WRID != wrid {
		t.Fatalf("ibvtest: completion %+v (status %v), want success of WR %d", wc, wc.Status, wrid)
	}
	return wc
}

// RegMR allocates n bytes with the provider's Alloc, fills them with fill (may be nil) and
// registers them in pd with access. The MR is deregistered at cleanup unless the test did.
func RegMR(t testing.TB, p Provider, pd *ibv.PD, n int, access ibv.Access, fill []byte) *ibv.MR {
	t.Helper()
	buf := p.Alloc(t, n)
	copy(buf, fill)
	mr, err := pd.RegMR(buf, access)
	must(t, "RegMR", err)
	t.Cleanup(func() { _ = mr.Dereg() })
	return mr
}

// Pattern returns n bytes of a deterministic pseudo-random pattern named by seed (xorshift64), so
// a misplaced or shifted byte is caught.
func Pattern(seed uint64, n int) []byte {
	b := make([]byte, n)
	FillPattern(seed, b)
	return b
}

// FillPattern fills b with Pattern(seed, len(b)).
func FillPattern(seed uint64, b []byte) {
	x := seed*0x9E3779B97F4A7C15 | 1
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i], b[i+1], b[i+2], b[i+3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
		b[i+4], b[i+5], b[i+6], b[i+7] = byte(x>>32), byte(x>>40), byte(x>>48), byte(x>>56)
	}
	for ; i < len(b); i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
}

// SameBytes fails the test when got differs from want, naming the first differing offset
// instead of printing megabytes.
func SameBytes(t testing.TB, what string, want, got []byte) bool {
	t.Helper()
	if bytes.Equal(want, got) {
		return true
	}
	if len(want) != len(got) {
		t.Errorf("%s: %d bytes, want %d", what, len(got), len(want))
		return false
	}
	n := 0
	first := -1
	for i := range want {
		if want[i] != got[i] {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	t.Errorf("%s: %d of %d bytes differ, first at offset %d (got %#02x, want %#02x)", what, n, len(want), first, got[first], want[first])
	return false
}

func must(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("ibvtest: %s: %v", what, err)
	}
}
