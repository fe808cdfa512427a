package ibv_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQPModifyIllegalKeepsState(t *testing.T) {
	for _, typ := range []ibv.QPType{ibv.RC, ibv.UD} {
		for _, s := range []ibv.QPState{ibv.StateReset, ibv.StateInit, ibv.StateRTR, ibv.StateRTS, ibv.StateSQD, ibv.StateError} {
			t.Run(fmt.Sprintf("%v/%v", typ, s), func(t *testing.T) {
				qp, d := newStubQP(t, typ)
				driveTo(t, qp, s)
				before := qp.Query()
				n := len(d.qps[0].modifys)
				for _, to := range allStates {
					if _, ok := legal(typ, s, to); ok {
						continue
					}
					err := qp.Modify(&ibv.QPAttr{State: to, SQPSN: 1, RQPSN: 1, PortNum: 1, QKey: 1,
						AV: ibv.AHAttr{Addr: "x"}, DestQPN: 9}, ibv.AttrState)
					require.ErrorIs(t, err, ibv.ErrInvalidTransition, "%v→%v", s, to)
					assert.Equal(t, s, qp.State())
				}
				assert.Equal(t, before, qp.Query())
				assert.Len(t, d.qps[0].modifys, n, "the driver never saw a refused modify")
			})
		}
	}
}

func TestQPModifyRecordsAttributes(t *testing.T) {
	qp, _ := newStubQP(t, ibv.RC)
	driveTo(t, qp, ibv.StateRTS)
	a := qp.Query()
	assert.Equal(t, ibv.StateRTS, a.State)
	assert.Equal(t, ibv.StateRTS, a.CurState)
	assert.Equal(t, uint8(1), a.PortNum)
	assert.Equal(t, ibv.AccessAll, a.AccessFlags)
	assert.Equal(t, "stub:1", a.AV.Addr)
	assert.Equal(t, uint32(7), a.DestQPN)
	assert.Equal(t, uint32(100), a.RQPSN)
	assert.Equal(t, uint32(200), a.SQPSN)
	assert.Equal(t, ibv.Migrated, a.PathMigState)
	assert.Equal(t, ibv.DefaultMaxSendWR, a.Cap.MaxSendWR)
}

func TestQPModifyDriverErrorKeepsAttributes(t *testing.T) {
	qp, d := newStubQP(t, ibv.RC)
	driveTo(t, qp, ibv.StateRTR)
	before := qp.Query()
	d.mu.Lock()
	d.modifyErr = fmt.Errorf("stub: %w", ibv.ErrUnreachable)
	d.mu.Unlock()
	err := qp.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: 5, RetryCnt: 3}, ibv.AttrState|ibv.AttrSQPSN|ibv.AttrRetryCnt)
	require.ErrorIs(t, err, ibv.ErrUnreachable)
	assert.Equal(t, before, qp.Query())
	assert.Equal(t, ibv.StateRTR, qp.State())
}

func TestQPModifyArgumentChecks(t *testing.T) {
	qp, _ := newStubQP(t, ibv.RC)
	err := qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: 0}, ibv.AttrState|ibv.AttrPort|ibv.AttrAccessFlags)
	assert.ErrorIs(t, err, ibv.ErrInvalidArgument, "port 0")
	require.Equal(t, ibv.StateReset, qp.State())
	driveTo(t, qp, ibv.StateInit)
	attr, mask := rcRTRAttr()
	attr.AV.Addr = ""
	assert.ErrorIs(t, qp.Modify(attr, mask), ibv.ErrInvalidArgument, "RC path without address")
	require.Equal(t, ibv.StateInit, qp.State())
	driveTo(t, qp, ibv.StateRTR)
	err = qp.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: 1, RetryCnt: 8}, ibv.AttrState|ibv.AttrSQPSN|ibv.AttrRetryCnt)
	assert.ErrorIs(t, err, ibv.ErrInvalidArgument, "retry count 8")
	assert.Equal(t, ibv.StateRTR, qp.State())
}

func TestQPAPMRequests(t *testing.T) {
	qp, _ := newStubQP(t, ibv.RC)
	driveTo(t, qp, ibv.StateRTS)
	primary := qp.Query().AV
	alt := ibv.AHAttr{Addr: "stub:alt", DLID: 2, SrcPathBits: 1, PortNum: 1}

	// REARM without any alternate path is refused and changes nothing.
	err := qp.Modify(&ibv.QPAttr{PathMigState: ibv.Rearm}, ibv.AttrPathMigState)
	require.ErrorIs(t, err, ibv.ErrInvalidTransition)
	assert.Equal(t, ibv.Migrated, qp.Query().PathMigState)

	// Manual migration needs ARMED.
	err = qp.Modify(&ibv.QPAttr{PathMigState: ibv.Migrated}, ibv.AttrPathMigState)
	require.NoError(t, err, "restating MIGRATED is allowed")
	assert.Equal(t, primary, qp.Query().AV, "no swap from MIGRATED")

	// Load an alternate path.
	err = qp.Modify(&ibv.QPAttr{PathMigState: ibv.Rearm, AltAV: alt, AltPortNum: 1}, ibv.AttrPathMigState|ibv.AttrAltPath)
	require.NoError(t, err)
	a := qp.Query()
	assert.Equal(t, ibv.Rearm, a.PathMigState)
	assert.Equal(t, alt, a.AltAV)

	// The consumer cannot arm; REARM→MIGRATED is not a request either.
	assert.ErrorIs(t, qp.Modify(&ibv.QPAttr{PathMigState: ibv.Armed}, ibv.AttrPathMigState), ibv.ErrInvalidTransition)
	assert.ErrorIs(t, qp.Modify(&ibv.QPAttr{PathMigState: ibv.Migrated}, ibv.AttrPathMigState), ibv.ErrInvalidTransition)
	assert.Equal(t, ibv.Rearm, qp.Query().PathMigState)

	// REARM again: the stored alternate path suffices.
	require.NoError(t, qp.Modify(&ibv.QPAttr{PathMigState: ibv.Rearm}, ibv.AttrPathMigState))

	// The provider loads it.
	provider.SetArmed(qp, true, "loaded")
	assert.Equal(t, ibv.Armed, qp.Query().PathMigState)

	// Manual migration ARMED→MIGRATED swaps primary and alternate.
	require.NoError(t, qp.Modify(&ibv.QPAttr{PathMigState: ibv.Migrated}, ibv.AttrPathMigState))
	a = qp.Query()
	assert.Equal(t, ibv.Migrated, a.PathMigState)
	assert.Equal(t, alt, a.AV)
	assert.Equal(t, primary, a.AltAV)

	// UD QPs have no path migration.
	ud, _ := newStubQP(t, ibv.UD)
	driveTo(t, ud, ibv.StateRTS)
	assert.ErrorIs(t, ud.Modify(&ibv.QPAttr{PathMigState: ibv.Rearm, AltAV: alt}, ibv.AttrPathMigState|ibv.AttrAltPath), ibv.ErrInvalidTransition)
}

func TestQPAutoMigrationAndArmFailure(t *testing.T) {
	qp, _ := newStubQP(t, ibv.RC)
	driveTo(t, qp, ibv.StateRTS)
	c := qp.Context()
	primary := qp.Query().AV
	_, ok := provider.MigrateAuto(qp, "fault")
	assert.False(t, ok, "not ARMED: no migration")

	alt := ibv.AHAttr{Addr: "stub:alt", PortNum: 1}
	require.NoError(t, qp.Modify(&ibv.QPAttr{PathMigState: ibv.Rearm, AltAV: alt, AltPortNum: 1}, ibv.AttrPathMigState|ibv.AttrAltPath))
	provider.SetArmed(qp, false, "alt unreachable")
	assert.Equal(t, ibv.Rearm, qp.Query().PathMigState)
	ev := nextEvent(t, c)
	assert.Equal(t, ibv.EventPathMigErr, ev.Type)
	assert.Equal(t, qp.Num(), ev.QPNum)

	provider.SetArmed(qp, true, "")
	av, ok := provider.MigrateAuto(qp, "primary failed")
	require.True(t, ok)
	assert.Equal(t, alt, av)
	a := qp.Query()
	assert.Equal(t, alt, a.AV)
	assert.Equal(t, primary, a.AltAV)
	assert.Equal(t, ibv.Migrated, a.PathMigState)
	ev = nextEvent(t, c)
	assert.Equal(t, ibv.EventPathMig, ev.Type)
	assert.Equal(t, qp.Num(), ev.QPNum)

	// Reset returns the APM state to MIGRATED.
	require.NoError(t, qp.Modify(&ibv.QPAttr{PathMigState: ibv.Rearm}, ibv.AttrPathMigState))
	require.NoError(t, qp.Modify(&ibv.QPAttr{State: ibv.StateReset}, ibv.AttrState))
	assert.Equal(t, ibv.Migrated, qp.Query().PathMigState)
}

func TestQPPostChecks(t *testing.T) {
	for _, s := range []ibv.QPState{ibv.StateReset, ibv.StateInit, ibv.StateRTR} {
		qp, d := newStubQP(t, ibv.RC)
		driveTo(t, qp, s)
		err := qp.PostSend(&ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}})
		assert.ErrorIs(t, err, ibv.ErrInvalidState, "PostSend in %v", s)
		assert.Empty(t, d.qps[0].sends)
	}
	qp, d := newStubQP(t, ibv.RC)
	assert.ErrorIs(t, qp.PostRecv(&ibv.RecvWR{ID: 1}), ibv.ErrInvalidState, "PostRecv in RESET")
	driveTo(t, qp, ibv.StateInit)
	require.NoError(t, qp.PostRecv(&ibv.RecvWR{ID: 2}))
	driveTo(t, qp, ibv.StateRTS)

	sgl := make([]ibv.SGE, qp.Cap().MaxSendSGE+1)
	assert.ErrorIs(t, qp.PostSend(&ibv.SendWR{Opcode: ibv.OpRDMAWrite, SGL: sgl}), ibv.ErrInvalidArgument, "too many SGEs")
	assert.ErrorIs(t, qp.PostSend(&ibv.SendWR{Opcode: ibv.OpRDMAWrite, SGL: sgl[:1], LocalBuf: []byte{1}}), ibv.ErrInvalidArgument, "LocalBuf and SGL")
	assert.ErrorIs(t, qp.PostRecv(&ibv.RecvWR{SGL: make([]ibv.SGE, qp.Cap().MaxRecvSGE+1)}), ibv.ErrInvalidArgument)
	assert.ErrorIs(t, qp.PostSend(&ibv.SendWR{Opcode: 0}), ibv.ErrInvalidArgument)
	assert.Empty(t, d.qps[0].sends)

	require.NoError(t, qp.PostSend(&ibv.SendWR{ID: 9, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}}))
	require.Len(t, d.qps[0].sends, 1)
	assert.Equal(t, uint64(9), d.qps[0].sends[0].ID)
	assert.Len(t, d.qps[0].recvs, 1)

	// SQD and ERROR accept posts (ERROR: the provider flushes them).
	driveTo(t, qp, ibv.StateError)
	require.NoError(t, qp.PostSend(&ibv.SendWR{ID: 10, Opcode: ibv.OpRDMAWrite, LocalBuf: []byte{1}}))
	assert.Len(t, d.qps[0].sends, 2)
}

func TestQPCreateChecks(t *testing.T) {
	c, _ := newStub(t)
	pd, err := c.AllocPD()
	require.NoError(t, err)
	cq, err := c.CreateCQ(4)
	require.NoError(t, err)
	_, err = pd.CreateQP(ibv.QPInitAttr{Type: 9, SendCQ: cq, RecvCQ: cq})
	assert.ErrorIs(t, err, ibv.ErrInvalidArgument)
	_, err = pd.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: cq})
	assert.ErrorIs(t, err, ibv.ErrInvalidArgument)
	_, err = pd.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: cq, RecvCQ: cq, Cap: ibv.QPCap{MaxSendSGE: ibv.MaxSGEPerWR + 1}})
	assert.ErrorIs(t, err, ibv.ErrInvalidArgument)
	_, err = pd.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: cq, RecvCQ: cq, Cap: ibv.QPCap{MaxRecvWR: -1}})
	assert.ErrorIs(t, err, ibv.ErrInvalidArgument)

	q1, err := pd.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: cq, RecvCQ: cq})
	require.NoError(t, err)
	q2, err := pd.CreateQP(ibv.QPInitAttr{Type: ibv.UD, SendCQ: cq, RecvCQ: cq, Cap: ibv.QPCap{MaxSendWR: 3}})
	require.NoError(t, err)
	assert.NotEqual(t, q1.Num(), q2.Num())
	assert.Equal(t, 3, q2.Cap().MaxSendWR)
	assert.Equal(t, ibv.StateReset, q1.State())
	assert.Same(t, q1, provider.LookupQP(c, q1.Num()))

	assert.ErrorIs(t, cq.Destroy(), ibv.ErrBusy, "CQ in use")
	assert.ErrorIs(t, pd.Dealloc(), ibv.ErrBusy, "PD in use")
	require.NoError(t, q1.Destroy())
	require.NoError(t, q1.Destroy(), "second Destroy is a no-op")
	assert.Nil(t, provider.LookupQP(c, q1.Num()))
	assert.ErrorIs(t, q1.Modify(&ibv.QPAttr{State: ibv.StateError}, ibv.AttrState), ibv.ErrClosed)
	assert.ErrorIs(t, q1.PostSend(&ibv.SendWR{Opcode: ibv.OpSend}), ibv.ErrClosed)
	assert.ErrorIs(t, q1.PostRecv(&ibv.RecvWR{}), ibv.ErrClosed)
	require.NoError(t, q2.Destroy())
	assert.NoError(t, cq.Destroy())
	assert.NoError(t, pd.Dealloc())
}

func TestCheckSendWR(t *testing.T) {
	ah := &ibv.AH{Attr: ibv.AHAttr{Addr: "x"}}
	b4, b8 := make([]byte, 4), make([]byte, 8)
	cases := []struct {
		name string
		typ  ibv.QPType
		wr   ibv.SendWR
		err  error
	}{
		{"rc send", ibv.RC, ibv.SendWR{Opcode: ibv.OpSend}, nil},
		{"rc send imm", ibv.RC, ibv.SendWR{Opcode: ibv.OpSendImm, Imm: 5}, nil},
		{"ud send", ibv.UD, ibv.SendWR{Opcode: ibv.OpSend, AH: ah}, nil},
		{"ud send without AH", ibv.UD, ibv.SendWR{Opcode: ibv.OpSend}, ibv.ErrInvalidArgument},
		{"rc write", ibv.RC, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: b4, RemoteAddr: 3}, nil},
		{"rc write imm", ibv.RC, ibv.SendWR{Opcode: ibv.OpRDMAWriteImm}, nil},
		{"rc read", ibv.RC, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: b4}, nil},
		{"ud write", ibv.UD, ibv.SendWR{Opcode: ibv.OpRDMAWrite, AH: ah}, ibv.ErrInvalidArgument},
		{"ud read", ibv.UD, ibv.SendWR{Opcode: ibv.OpRDMARead, AH: ah}, ibv.ErrInvalidArgument},
		{"fadd", ibv.RC, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: b8, RemoteAddr: 16}, nil},
		{"fadd 4-byte buffer", ibv.RC, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: b4, RemoteAddr: 16}, ibv.ErrInvalidArgument},
		{"fadd misaligned", ibv.RC, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: b8, RemoteAddr: 12}, ibv.ErrInvalidArgument},
		{"fadd sgl", ibv.RC, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, SGL: []ibv.SGE{{Length: 4}, {Length: 4}}, RemoteAddr: 8}, nil},
		{"fadd sgl 9 bytes", ibv.RC, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, SGL: []ibv.SGE{{Length: 9}}, RemoteAddr: 8}, ibv.ErrInvalidArgument},
		{"cswap", ibv.RC, ibv.SendWR{Opcode: ibv.OpAtomicCmpSwap, LocalBuf: b8, RemoteAddr: 8}, nil},
		{"cswap misaligned", ibv.RC, ibv.SendWR{Opcode: ibv.OpAtomicCmpSwap, LocalBuf: b8, RemoteAddr: 4}, ibv.ErrInvalidArgument},
		{"cswap no buffer", ibv.RC, ibv.SendWR{Opcode: ibv.OpAtomicCmpSwap, RemoteAddr: 8}, ibv.ErrInvalidArgument},
		{"swap64", ibv.RC, ibv.SendWR{Opcode: ibv.OpAtomicSwap64, LocalBuf: b8, RemoteAddr: 8}, nil},
		{"fadd32", ibv.RC, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd32, LocalBuf: b4, RemoteAddr: 4}, nil},
		{"fadd32 8-byte buffer", ibv.RC, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd32, LocalBuf: b8, RemoteAddr: 4}, ibv.ErrInvalidArgument},
		{"fadd32 misaligned", ibv.RC, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd32, LocalBuf: b4, RemoteAddr: 2}, ibv.ErrInvalidArgument},
		{"swap32", ibv.RC, ibv.SendWR{Opcode: ibv.OpAtomicSwap32, LocalBuf: b4, RemoteAddr: 4}, nil},
		{"cswap32", ibv.RC, ibv.SendWR{Opcode: ibv.OpAtomicCmpSwap32, LocalBuf: b4, RemoteAddr: 4}, nil},
		{"cswap32 misaligned", ibv.RC, ibv.SendWR{Opcode: ibv.OpAtomicCmpSwap32, LocalBuf: b4, RemoteAddr: 1}, ibv.ErrInvalidArgument},
		{"ud atomic", ibv.UD, ibv.SendWR{Opcode: ibv.OpAtomicFetchAdd, LocalBuf: b8, RemoteAddr: 8, AH: ah}, ibv.ErrInvalidArgument},
		{"acc int64", ibv.RC, ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: ibv.AccInt64, LocalBuf: make([]byte, 24), RemoteAddr: 8}, nil},
		{"acc int64 ragged", ibv.RC, ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: ibv.AccInt64, LocalBuf: make([]byte, 20), RemoteAddr: 8}, ibv.ErrInvalidArgument},
		{"acc int64 misaligned", ibv.RC, ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: ibv.AccInt64, LocalBuf: b8, RemoteAddr: 4}, ibv.ErrInvalidArgument},
		{"acc complex64 4-aligned", ibv.RC, ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: ibv.AccComplex64, LocalBuf: b8, RemoteAddr: 4}, nil},
		{"acc complex128 8-aligned", ibv.RC, ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: ibv.AccComplex128, LocalBuf: make([]byte, 32), RemoteAddr: 8}, nil},
		{"acc complex128 half element", ibv.RC, ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: ibv.AccComplex128, LocalBuf: make([]byte, 24), RemoteAddr: 8}, ibv.ErrInvalidArgument},
		{"acc unknown type", ibv.RC, ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: 0, LocalBuf: b8, RemoteAddr: 8}, ibv.ErrInvalidArgument},
		{"acc ud", ibv.UD, ibv.SendWR{Opcode: ibv.OpAccumulate, AccType: ibv.AccInt32, LocalBuf: b4, RemoteAddr: 4, AH: ah}, ibv.ErrInvalidArgument},
		{"unknown opcode", ibv.RC, ibv.SendWR{Opcode: 99}, ibv.ErrInvalidArgument},
		{"zero opcode", ibv.RC, ibv.SendWR{}, ibv.ErrInvalidArgument},
	}
	for _, c := range cases {
		err := ibv.CheckSendWR(c.typ, &c.wr)
		if c.err == nil {
			assert.NoError(t, err, c.name)
		} else {
			assert.True(t, errors.Is(err, c.err), "%s: got %v", c.name, err)
		}
	}
}

func TestOpcodeTables(t *testing.T) {
	sizes := map[ibv.Opcode]int{ibv.OpAtomicCmpSwap: 8, ibv.OpAtomicFetchAdd: 8, ibv.OpAtomicSwap64: 8,
		ibv.OpAtomicFetchAdd32: 4, ibv.OpAtomicSwap32: 4, ibv.OpAtomicCmpSwap32: 4, ibv.OpAccumulate: 0,
		ibv.OpSend: 0, ibv.OpRDMAWrite: 0, ibv.OpRDMARead: 0}
	for op, n := range sizes {
		assert.Equal(t, n, op.AtomicSize(), "%v", op)
	}
	for _, op := range []ibv.Opcode{ibv.OpSend, ibv.OpSendImm, ibv.OpRDMAWrite, ibv.OpRDMAWriteImm, ibv.OpRDMARead} {
		assert.False(t, op.IsAtomic(), "%v", op)
	}
	for _, op := range []ibv.Opcode{ibv.OpAtomicCmpSwap, ibv.OpAtomicFetchAdd, ibv.OpAtomicFetchAdd32, ibv.OpAtomicSwap64, ibv.OpAtomicSwap32, ibv.OpAtomicCmpSwap32, ibv.OpAccumulate} {
		assert.True(t, op.IsAtomic(), "%v", op)
	}
	wc := map[ibv.Opcode]ibv.WCOpcode{ibv.OpSend: ibv.WCSend, ibv.OpSendImm: ibv.WCSend, ibv.OpRDMAWrite: ibv.WCRDMAWrite,
		ibv.OpRDMAWriteImm: ibv.WCRDMAWrite, ibv.OpRDMARead: ibv.WCRDMARead, ibv.OpAtomicCmpSwap: ibv.WCCompSwap,
		ibv.OpAtomicFetchAdd: ibv.WCFetchAdd, ibv.OpAtomicSwap64: ibv.WCAtomicExt, ibv.OpAccumulate: ibv.WCAtomicExt}
	for op, w := range wc {
		assert.Equal(t, w, provider.WCOpcodeOf(op), "%v", op)
	}
	assert.Equal(t, uint64(12), (&ibv.SendWR{SGL: []ibv.SGE{{Length: 5}, {Length: 7}}}).LocalLen())
	assert.Equal(t, uint64(3), (&ibv.SendWR{LocalBuf: make([]byte, 3)}).LocalLen())
}
