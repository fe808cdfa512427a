//go:build linux

package shm

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
)

// end is one endpoint of a test: device, PD, CQ, one RC QP.
type end struct {
	ctx  *ibv.Context
	pd   *ibv.PD
	cq   *ibv.CQ
	qp   *ibv.QP
	addr string
}

func testJob() string { return fmt.Sprintf("t%d-%x", os.Getpid(), rand.Uint32()) }

func openEnd(t testing.TB, job, name string) *end {
	t.Helper()
	return openEndCfg(t, Config{Job: job, Name: name})
}

// openEndCfg is openEnd with a whole Config (a directory other than the default, ...).
func openEndCfg(t testing.TB, cfg Config) *end {
	t.Helper()
	ctx, err := Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ctx.Close() })
	e := &end{ctx: ctx}
	pa, err := ctx.QueryPort(1)
	require.NoError(t, err)
	require.Equal(t, Addr(cfg.Job, cfg.Name), pa.Addr)
	e.addr = pa.Addr
	e.pd, err = ctx.AllocPD()
	require.NoError(t, err)
	e.cq, err = ctx.CreateCQ(4096)
	require.NoError(t, err)
	e.qp = e.newQP(t)
	return e
}

func (e *end) newQP(t testing.TB) *ibv.QP {
	qp, err := e.pd.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: e.cq, RecvCQ: e.cq})
	require.NoError(t, err)
	return qp
}

func toInit(t testing.TB, qp *ibv.QP, access ibv.Access) {
	require.NoError(t, qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: 1, AccessFlags: access},
		ibv.AttrState|ibv.AttrPort|ibv.AttrAccessFlags))
}

// toRTS connects qp to QP dest at addr; with short set, the ACK timeout is tiny (so waiting for
// an absent responder ends quickly).
func toRTS(t testing.TB, qp *ibv.QP, addr string, dest uint32, short ...bool) {
	require.NoError(t, qp.Modify(&ibv.QPAttr{State: ibv.StateRTR, AV: ibv.AHAttr{Addr: addr, PortNum: 1}, DestQPN: dest},
		ibv.AttrState|ibv.AttrAV|ibv.AttrDestQPN|ibv.AttrRQPSN))
	if len(short) > 0 && short[0] {
		require.NoError(t, qp.Modify(&ibv.QPAttr{State: ibv.StateRTS, Timeout: 1, RetryCnt: 1},
			ibv.AttrState|ibv.AttrSQPSN|ibv.AttrTimeout|ibv.AttrRetryCnt))
		return
	}
	require.NoError(t, qp.Modify(&ibv.QPAttr{State: ibv.StateRTS}, ibv.AttrState|ibv.AttrSQPSN))
}

// connectQPs connects qa (on a) and qb (on b) with the given remote access on both.
func connectQPs(t testing.TB, a *end, qa *ibv.QP, b *end, qb *ibv.QP, access ibv.Access) {
	toInit(t, qa, access)
	toInit(t, qb, access)
	toRTS(t, qa, b.addr, qb.Num())
	toRTS(t, qb, a.addr, qa.Num())
}

// do posts a signaled request and returns its completion (the provider completes in PostSend).
func do(t testing.TB, e *end, qp *ibv.QP, wr ibv.SendWR) ibv.WC {
	t.Helper()
	wr.Flags |= ibv.SendSignaled
	require.NoError(t, qp.PostSend(&wr))
	var wc [1]ibv.WC
	require.Equal(t, 1, e.cq.Poll(wc[:]), "no completion")
	return wc[0]
}

func allocMR(t testing.TB, e *end, n int, access ibv.Access) ([]byte, *ibv.MR) {
	t.Helper()
	b, err := AllocBuffer(n)
	require.NoError(t, err)
	mr, err := e.pd.RegMR(b, access)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = mr.Dereg()
		require.NoError(t, FreeBuffer(b))
	})
	return b, mr
}
