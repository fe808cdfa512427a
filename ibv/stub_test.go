package ibv_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/stretchr/testify/require"
)

// stubDriver is a provider that moves no bytes: it records what the generic layer asks of it, so
// the generic checks can be tested without a transport.
type stubDriver struct {
	mu        sync.Mutex
	regs      int
	deregs    int
	closed    int
	refuseMR  bool
	qps       []*stubQP
	modifyErr error // returned by every QP's Modify when set
}

type stubQP struct {
	d       *stubDriver
	mu      sync.Mutex
	modifys []ibv.AttrMask
	sends   []ibv.SendWR
	recvs   []ibv.RecvWR
	gone    bool
}

var errStubRefused = errors.New("stub: refused")

func (d *stubDriver) Attr() ibv.DeviceAttr {
	return ibv.DeviceAttr{Name: "stub0", Provider: "stub", PhysPortCnt: 1, MaxMsgSize: 1 << 30}
}

func (d *stubDriver) Port(num uint8) (ibv.PortAttr, error) {
	if num != 1 {
		return ibv.PortAttr{}, ibv.ErrInvalidArgument
	}
	return ibv.PortAttr{Num: 1, State: ibv.PortActive, LID: 1, MTU: 4096, Addr: "stub:1"}, nil
}

func (d *stubDriver) RegMR(mr *ibv.MR) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.refuseMR {
		return errStubRefused
	}
	d.regs++
	return nil
}

func (d *stubDriver) DeregMR(mr *ibv.MR) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deregs++
	return nil
}

func (d *stubDriver) CreateQP(qp *ibv.QP) (ibv.QPDriver, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	q := &stubQP{d: d}
	d.qps = append(d.qps, q)
	return q, nil
}

func (d *stubDriver) CreateAH(ah *ibv.AH) error { return nil }

func (d *stubDriver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed++
	return nil
}

func (q *stubQP) Modify(cur, attr *ibv.QPAttr, mask ibv.AttrMask) error {
	q.d.mu.Lock()
	err := q.d.modifyErr
	q.d.mu.Unlock()
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.modifys = append(q.modifys, mask)
	return nil
}

func (q *stubQP) PostSend(wr *ibv.SendWR) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sends = append(q.sends, *wr)
	return nil
}

func (q *stubQP) PostRecv(wr *ibv.RecvWR) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.recvs = append(q.recvs, *wr)
	return nil
}

func (q *stubQP) Destroy() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.gone = true
	return nil
}

func newStub(t *testing.T) (*ibv.Context, *stubDriver) {
	t.Helper()
	d := &stubDriver{}
	c := provider.NewContext(d)
	t.Cleanup(func() { _ = c.Close() })
	return c, d
}

// newStubQP creates a QP of type typ with its own CQs on a fresh stub device.
func newStubQP(t *testing.T, typ ibv.QPType) (*ibv.QP, *stubDriver) {
	t.Helper()
	c, d := newStub(t)
	pd, err := c.AllocPD()
	require.NoError(t, err)
	cq, err := c.CreateCQ(16)
	require.NoError(t, err)
	qp, err := pd.CreateQP(ibv.QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq})
	require.NoError(t, err)
	return qp, d
}

// rcRTRAttr is a complete INIT→RTR request for an RC QP.
func rcRTRAttr() (*ibv.QPAttr, ibv.AttrMask) {
	return &ibv.QPAttr{State: ibv.StateRTR, AV: ibv.AHAttr{Addr: "stub:1", DLID: 1, PortNum: 1}, DestQPN: 7, RQPSN: 100},
		ibv.AttrState | ibv.AttrAV | ibv.AttrDestQPN | ibv.AttrRQPSN
}

// driveTo moves qp from RESET to state s along the usual path.
func driveTo(t *testing.T, qp *ibv.QP, s ibv.QPState) {
	t.Helper()
	steps := []ibv.QPState{ibv.StateInit, ibv.StateRTR, ibv.StateRTS, ibv.StateSQD}
	if s == ibv.StateReset {
		return
	}
	if s == ibv.StateError {
		require.NoError(t, qp.Modify(&ibv.QPAttr{State: ibv.StateError}, ibv.AttrState))
		return
	}
	for _, st := range steps {
		var attr *ibv.QPAttr
		var mask ibv.AttrMask
		switch st {
		case ibv.StateInit:
			attr = &ibv.QPAttr{State: st, PortNum: 1, AccessFlags: ibv.AccessAll, QKey: 0x1111}
			mask = ibv.AttrState | ibv.AttrPort
			if qp.Type() == ibv.RC {
				mask |= ibv.AttrAccessFlags
			} else {
				mask |= ibv.AttrQKey
			}
		case ibv.StateRTR:
			if qp.Type() == ibv.RC {
				attr, mask = rcRTRAttr()
			} else {
				attr, mask = &ibv.QPAttr{State: st}, ibv.AttrState
			}
		case ibv.StateRTS:
			attr, mask = &ibv.QPAttr{State: st, SQPSN: 200}, ibv.AttrState|ibv.AttrSQPSN
		case ibv.StateSQD:
			attr, mask = &ibv.QPAttr{State: st}, ibv.AttrState
		}
		require.NoError(t, qp.Modify(attr, mask), "to %v", st)
		require.Equal(t, st, qp.State())
		if st == s {
			return
		}
	}
	t.Fatalf("driveTo: cannot reach %v", s)
}
