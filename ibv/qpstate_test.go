package ibv_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/goarmci/goarmci/ibv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var allStates = []ibv.QPState{ibv.StateReset, ibv.StateInit, ibv.StateRTR, ibv.StateRTS, ibv.StateSQD, ibv.StateSQE, ibv.StateError}

// allAttrs is every attribute bit ibv defines.
var allAttrs = []ibv.AttrMask{ibv.AttrState, ibv.AttrAccessFlags, ibv.AttrPKeyIndex, ibv.AttrPort, ibv.AttrQKey,
	ibv.AttrAV, ibv.AttrPathMTU, ibv.AttrTimeout, ibv.AttrRetryCnt, ibv.AttrRNRRetry, ibv.AttrRQPSN,
	ibv.AttrMaxQPRdAtom, ibv.AttrAltPath, ibv.AttrMinRNRTimer, ibv.AttrSQPSN, ibv.AttrMaxDestRdAtm,
	ibv.AttrPathMigState, ibv.AttrDestQPN}

// legal is the IBA vol. 1 §10.3 transition table [Vishnu07 §2.2] written out independently of the
// implementation: the attributes each legal modify requires. Every pair not listed is illegal,
// except that any state may go to RESET or ERROR.
func legal(t ibv.QPType, from, to ibv.QPState) (required ibv.AttrMask, ok bool) {
	S := ibv.AttrState
	if to == ibv.StateReset || to == ibv.StateError {
		return S, true
	}
	switch {
	case from == ibv.StateReset && to == ibv.StateInit && t == ibv.RC:
		return S | ibv.AttrPort | ibv.AttrAccessFlags, true
	case from == ibv.StateReset && to == ibv.StateInit && t == ibv.UD:
		return S | ibv.AttrPort | ibv.AttrQKey, true
	case from == ibv.StateInit && to == ibv.StateInit:
		return S, true
	case from == ibv.StateInit && to == ibv.StateRTR && t == ibv.RC:
		return S | ibv.AttrAV | ibv.AttrDestQPN | ibv.AttrRQPSN, true
	case from == ibv.StateInit && to == ibv.StateRTR && t == ibv.UD:
		return S, true
	case from == ibv.StateRTR && to == ibv.StateRTS:
		return S | ibv.AttrSQPSN, true
	case from == ibv.StateRTS && (to == ibv.StateRTS || to == ibv.StateSQD):
		return S, true
	case from == ibv.StateSQD && (to == ibv.StateRTS || to == ibv.StateSQD):
		return S, true
	case from == ibv.StateSQE && to == ibv.StateRTS && t == ibv.UD:
		return S, true
	}
	return 0, false
}

func TestValidTransitionEveryPair(t *testing.T) {
	var all ibv.AttrMask
	for _, a := range allAttrs {
		all |= a
	}
	for _, typ := range []ibv.QPType{ibv.RC, ibv.UD} {
		for _, from := range allStates {
			for _, to := range allStates {
				t.Run(fmt.Sprintf("%v/%v-%v", typ, from, to), func(t *testing.T) {
					req, ok := legal(typ, from, to)
					if !ok {
						// Illegal whatever the attributes.
						for _, m := range []ibv.AttrMask{ibv.AttrState, all} {
							err := ibv.ValidTransition(typ, from, to, m)
							require.Error(t, err, "mask %#x", uint32(m))
							assert.ErrorIs(t, err, ibv.ErrInvalidTransition)
						}
						return
					}
					require.NoError(t, ibv.ValidTransition(typ, from, to, req))
					// Each required attribute is required.
					for _, a := range allAttrs {
						if req&a == 0 || a == ibv.AttrState {
							continue
						}
						err := ibv.ValidTransition(typ, from, to, req&^a)
						assert.ErrorIs(t, err, ibv.ErrInvalidTransition, "without %#x", uint32(a))
					}
					if to == ibv.StateReset || to == ibv.StateError {
						// These take no attribute at all.
						for _, a := range allAttrs {
							if a == ibv.AttrState {
								continue
							}
							assert.ErrorIs(t, ibv.ValidTransition(typ, from, to, req|a), ibv.ErrInvalidTransition, "with %#x", uint32(a))
						}
					}
				})
			}
		}
	}
}

// TestValidTransitionAttributes checks which optional attributes each transition accepts and
// which it refuses (the identity-carrying ones out of place).
func TestValidTransitionAttributes(t *testing.T) {
	S := ibv.AttrState
	cases := []struct {
		typ      ibv.QPType
		from, to ibv.QPState
		mask     ibv.AttrMask
		ok       bool
	}{
		{ibv.RC, ibv.StateReset, ibv.StateInit, S | ibv.AttrPort | ibv.AttrAccessFlags | ibv.AttrPKeyIndex, true},
		{ibv.RC, ibv.StateReset, ibv.StateInit, S | ibv.AttrPort | ibv.AttrAccessFlags | ibv.AttrQKey, false},
		{ibv.RC, ibv.StateReset, ibv.StateInit, S | ibv.AttrPort | ibv.AttrAccessFlags | ibv.AttrSQPSN, false},
		{ibv.RC, ibv.StateReset, ibv.StateInit, S | ibv.AttrPort | ibv.AttrAccessFlags | ibv.AttrAV, false},
		{ibv.UD, ibv.StateReset, ibv.StateInit, S | ibv.AttrPort | ibv.AttrQKey | ibv.AttrPKeyIndex, true},
		{ibv.UD, ibv.StateReset, ibv.StateInit, S | ibv.AttrPort | ibv.AttrQKey | ibv.AttrAccessFlags, false},
		{ibv.RC, ibv.StateInit, ibv.StateInit, S | ibv.AttrAccessFlags | ibv.AttrPort, true},
		{ibv.UD, ibv.StateInit, ibv.StateInit, S | ibv.AttrQKey, true},
		{ibv.RC, ibv.StateInit, ibv.StateRTR, S | ibv.AttrAV | ibv.AttrDestQPN | ibv.AttrRQPSN | ibv.AttrPathMTU | ibv.AttrMaxDestRdAtm | ibv.AttrMinRNRTimer | ibv.AttrAltPath, true},
		{ibv.RC, ibv.StateInit, ibv.StateRTR, S | ibv.AttrAV | ibv.AttrDestQPN | ibv.AttrRQPSN | ibv.AttrSQPSN, false},
		{ibv.RC, ibv.StateInit, ibv.StateRTR, S | ibv.AttrAV | ibv.AttrDestQPN | ibv.AttrRQPSN | ibv.AttrQKey, false},
		{ibv.RC, ibv.StateInit, ibv.StateRTR, S | ibv.AttrAV | ibv.AttrDestQPN | ibv.AttrRQPSN | ibv.AttrPathMigState, false},
		{ibv.UD, ibv.StateInit, ibv.StateRTR, S | ibv.AttrQKey, true},
		{ibv.UD, ibv.StateInit, ibv.StateRTR, S | ibv.AttrAV, false},
		{ibv.RC, ibv.StateRTR, ibv.StateRTS, S | ibv.AttrSQPSN | ibv.AttrTimeout | ibv.AttrRetryCnt | ibv.AttrRNRRetry | ibv.AttrMaxQPRdAtom | ibv.AttrAltPath | ibv.AttrPathMigState, true},
		{ibv.RC, ibv.StateRTR, ibv.StateRTS, S | ibv.AttrSQPSN | ibv.AttrAV, false},
		{ibv.RC, ibv.StateRTR, ibv.StateRTS, S | ibv.AttrSQPSN | ibv.AttrRQPSN, false},
		{ibv.UD, ibv.StateRTR, ibv.StateRTS, S | ibv.AttrSQPSN | ibv.AttrQKey, true},
		{ibv.UD, ibv.StateRTR, ibv.StateRTS, S | ibv.AttrSQPSN | ibv.AttrPathMigState, false},
		{ibv.RC, ibv.StateRTS, ibv.StateRTS, S | ibv.AttrAltPath | ibv.AttrPathMigState | ibv.AttrAccessFlags | ibv.AttrMinRNRTimer, true},
		{ibv.RC, ibv.StateRTS, ibv.StateRTS, S | ibv.AttrAV, false}, // the primary path changes only in SQD
		{ibv.RC, ibv.StateRTS, ibv.StateRTS, S | ibv.AttrDestQPN, false},
		{ibv.RC, ibv.StateRTS, ibv.StateSQD, S | ibv.AttrAltPath, false},
		{ibv.RC, ibv.StateSQD, ibv.StateSQD, S | ibv.AttrAV | ibv.AttrTimeout | ibv.AttrRetryCnt | ibv.AttrPort | ibv.AttrAltPath, true},
		{ibv.RC, ibv.StateSQD, ibv.StateSQD, S | ibv.AttrDestQPN, false},
		{ibv.RC, ibv.StateSQD, ibv.StateRTS, S | ibv.AttrAltPath | ibv.AttrPathMigState, true},
		{ibv.RC, ibv.StateSQD, ibv.StateRTS, S | ibv.AttrAV, false},
		{ibv.UD, ibv.StateSQE, ibv.StateRTS, S | ibv.AttrQKey, true},
		// Without AttrState a modify changes attributes in the current state.
		{ibv.RC, ibv.StateRTS, ibv.StateRTS, ibv.AttrAltPath | ibv.AttrPathMigState, true},
		{ibv.RC, ibv.StateRTS, ibv.StateRTS, ibv.AttrAV, false},
		{ibv.RC, ibv.StateRTR, ibv.StateRTR, ibv.AttrAccessFlags, false}, // no RTR→RTR rule
		{ibv.RC, ibv.StateReset, ibv.StateReset, ibv.AttrPort, false},
		{ibv.RC, ibv.StateError, ibv.StateError, ibv.AttrPort, false},
		{ibv.UD, ibv.StateInit, ibv.StateInit, ibv.AttrQKey, true},
	}
	for _, c := range cases {
		err := ibv.ValidTransition(c.typ, c.from, c.to, c.mask)
		if c.ok {
			assert.NoError(t, err, "%v %v→%v mask %#x", c.typ, c.from, c.to, uint32(c.mask))
		} else {
			assert.ErrorIs(t, err, ibv.ErrInvalidTransition, "%v %v→%v mask %#x", c.typ, c.from, c.to, uint32(c.mask))
		}
	}
	// A mask without AttrState ignores the requested state: it is an attribute change in place.
	assert.NoError(t, ibv.ValidTransition(ibv.RC, ibv.StateRTS, ibv.StateReset, ibv.AttrAltPath))
}

func TestValidTransitionUnknownType(t *testing.T) {
	for _, typ := range []ibv.QPType{0, ibv.DC + 1, 255} {
		err := ibv.ValidTransition(typ, ibv.StateReset, ibv.StateError, ibv.AttrState)
		assert.ErrorIs(t, err, ibv.ErrInvalidTransition, "type %v", typ)
	}
}

func TestValidMigRequestEveryPair(t *testing.T) {
	states := []ibv.MigState{ibv.Migrated, ibv.Rearm, ibv.Armed}
	// expected is written from the APM rules [Vishnu07 ch. 9]: a consumer may load an alternate
	// path (→REARM, needs one) from any state, migrate by hand (ARMED→MIGRATED), or restate the
	// current MIGRATED/ARMED state; REARM→ARMED and automatic migration are the hardware's.
	expected := func(cur, req ibv.MigState, hasAlt bool) bool {
		switch req {
		case ibv.Rearm:
			return hasAlt
		case ibv.Migrated:
			return cur == ibv.Migrated || cur == ibv.Armed
		case ibv.Armed:
			return cur == ibv.Armed
		}
		return false
	}
	for _, cur := range states {
		for _, req := range states {
			for _, alt := range []bool{false, true} {
				err := ibv.ValidMigRequest(cur, req, alt)
				if expected(cur, req, alt) {
					assert.NoError(t, err, "%v→%v alt=%v", cur, req, alt)
				} else {
					assert.True(t, errors.Is(err, ibv.ErrInvalidTransition), "%v→%v alt=%v: %v", cur, req, alt, err)
				}
			}
		}
	}
	// Unknown values are refused.
	assert.ErrorIs(t, ibv.ValidMigRequest(ibv.Migrated, 7, true), ibv.ErrInvalidTransition)
}

func TestStateNames(t *testing.T) {
	assert.Equal(t, "RTS", ibv.StateRTS.String())
	assert.Equal(t, "ERROR", ibv.StateError.String())
	assert.Equal(t, "QPState(9)", ibv.QPState(9).String())
	assert.Equal(t, "ARMED", ibv.Armed.String())
	assert.Equal(t, "REM_ACCESS_ERR", ibv.WCRemAccessErr.String())
	assert.Equal(t, "QP_FATAL", ibv.EventQPFatal.String())
	assert.Equal(t, "FETCH_ADD", ibv.OpAtomicFetchAdd.String())
}

// A DC QP returns to RESET only from INIT: once in RTR its peers may hold records keyed by its
// QP number, which a reset would desynchronise.
func TestValidTransitionDCReset(t *testing.T) {
	for _, from := range []ibv.QPState{ibv.StateReset, ibv.StateInit} {
		assert.NoError(t, ibv.ValidTransition(ibv.DC, from, ibv.StateReset, ibv.AttrState), "%v", from)
	}
	for _, from := range []ibv.QPState{ibv.StateRTR, ibv.StateRTS, ibv.StateError} {
		assert.ErrorIs(t, ibv.ValidTransition(ibv.DC, from, ibv.StateReset, ibv.AttrState), ibv.ErrInvalidTransition, "%v", from)
		assert.NoError(t, ibv.ValidTransition(ibv.DC, from, ibv.StateError, ibv.AttrState), "%v", from)
	}
	assert.NoError(t, ibv.ValidTransition(ibv.DC, ibv.StateInit, ibv.StateRTR, ibv.AttrState))
	assert.ErrorIs(t, ibv.ValidTransition(ibv.DC, ibv.StateInit, ibv.StateRTR, ibv.AttrState|ibv.AttrDestQPN), ibv.ErrInvalidTransition,
		"a DC QP has no destination")
}
