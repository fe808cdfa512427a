package ibv

import "fmt"

// The QP state machine (IBA vol. 1 §10.3, [Vishnu07 §2.2]), as a pure table. Software providers
// default the performance attributes that hardware requires at INIT→RTR and RTR→RTS (path MTU,
// RNR timer, timeout and retry counts, read/atomic depths), so only the attributes that carry
// identity (port, access, addresses, PSNs) are required here.

type transitionRule struct {
	required AttrMask
	optional AttrMask
}

type transitionKey struct {
	t        QPType
	from, to QPState
}

const (
	rcPerfAttrs = AttrPathMTU | AttrMaxDestRdAtm | AttrMinRNRTimer
	rcSendAttrs = AttrTimeout | AttrRetryCnt | AttrRNRRetry | AttrMaxQPRdAtom
	apmAttrs    = AttrAltPath | AttrPathMigState
)

var transitions = map[transitionKey]transitionRule{
	{RC, StateReset, StateInit}: {AttrState | AttrPort | AttrAccessFlags, AttrPKeyIndex},
	{UD, StateReset, StateInit}: {AttrState | AttrPort | AttrQKey, AttrPKeyIndex},
	{RC, StateInit, StateInit}:  {AttrState, AttrPort | AttrAccessFlags | AttrPKeyIndex},
	{UD, StateInit, StateInit}:  {AttrState, AttrPort | AttrQKey | AttrPKeyIndex},
	{RC, StateInit, StateRTR}: {AttrState | AttrAV | AttrDestQPN | AttrRQPSN,
		rcPerfAttrs | AttrAltPath | AttrAccessFlags | AttrPKeyIndex},
	{UD, StateInit, StateRTR}: {AttrState, AttrQKey | AttrPKeyIndex},
	{RC, StateRTR, StateRTS}: {AttrState | AttrSQPSN,
		rcSendAttrs | apmAttrs | AttrAccessFlags | AttrMinRNRTimer},
	{UD, StateRTR, StateRTS}: {AttrState | AttrSQPSN, AttrQKey},
	{RC, StateRTS, StateRTS}: {AttrState, apmAttrs | AttrAccessFlags | AttrMinRNRTimer},
	{UD, StateRTS, StateRTS}: {AttrState, AttrQKey},
	{RC, StateRTS, StateSQD}: {AttrState, 0},
	{UD, StateRTS, StateSQD}: {AttrState, 0},
	{RC, StateSQD, StateRTS}: {AttrState, apmAttrs | AttrAccessFlags | AttrMinRNRTimer},
	{UD, StateSQD, StateRTS}: {AttrState, AttrQKey},
	{RC, StateSQD, StateSQD}: {AttrState, AttrAV | rcSendAttrs | rcPerfAttrs | apmAttrs | AttrAccessFlags | AttrPort},
	{UD, StateSQD, StateSQD}: {AttrState, AttrQKey},
	{UD, StateSQE, StateRTS}: {AttrState, AttrQKey},
	// DC: one QP for every destination, so no path, QP number or PSNs (each destination's
	// record starts at PSN 0); the access flags gate incoming requests as RC's do.
	{DC, StateReset, StateInit}: {AttrState | AttrPort | AttrAccessFlags, AttrPKeyIndex},
	{DC, StateInit, StateInit}:  {AttrState, AttrPort | AttrAccessFlags | AttrPKeyIndex},
	{DC, StateInit, StateRTR}:   {AttrState, rcPerfAttrs | AttrAccessFlags | AttrPKeyIndex},
	{DC, StateRTR, StateRTS}:    {AttrState, rcSendAttrs | AttrAccessFlags | AttrMinRNRTimer},
	{DC, StateRTS, StateRTS}:    {AttrState, rcSendAttrs | AttrAccessFlags | AttrMinRNRTimer},
}

// ValidTransition reports whether a QP of type t may move from state from to state to with the
// attributes in mask, as ibv_modify_qp checks. Any state may move to RESET or ERROR with only
// AttrState, except that a DC QP returns to RESET only from INIT. A mask without AttrState is an attribute change in the current state (from == to)
// and follows the from→from rule. The error wraps ErrInvalidTransition and names what is wrong.
func ValidTransition(t QPType, from, to QPState, mask AttrMask) error {
	if t != RC && t != UD && t != DC {
		return fmt.Errorf("%w: QP type %v", ErrInvalidTransition, t)
	}
	if mask&AttrState == 0 {
		to = from
		mask |= AttrState
	}
	if t == DC && to == StateReset && from != StateReset && from != StateInit {
		// its peers keep reliability records keyed by its QP number: a reset QP would start
		// again at PSN 0 where they expect more, and its requests would pass for duplicates
		return fmt.Errorf("%w: a DC QP that reached RTR cannot be reset (destroy it and create a new one)", ErrInvalidTransition)
	}
	if to == StateReset || to == StateError {
		if extra := mask &^ AttrState; extra != 0 {
			return fmt.Errorf("%w: %v→%v takes no attributes (got mask %#x)", ErrInvalidTransition, from, to, uint32(extra))
		}
		return nil
	}
	r, ok := transitions[transitionKey{t, from, to}]
	if !ok {
		return fmt.Errorf("%w: %v QP cannot move %v→%v", ErrInvalidTransition, t, from, to)
	}
	if miss := r.required &^ mask; miss != 0 {
		return fmt.Errorf("%w: %v %v→%v misses required attributes (mask %#x)", ErrInvalidTransition, t, from, to, uint32(miss))
	}
	if extra := mask &^ (r.required | r.optional); extra != 0 {
		return fmt.Errorf("%w: %v %v→%v does not take attributes (mask %#x)", ErrInvalidTransition, t, from, to, uint32(extra))
	}
	return nil
}

// ValidMigRequest reports whether a consumer may set the path migration state of an RC QP from
// cur to req ([Vishnu07 ch. 9], "path loading request" and "path migration"):
//   - MIGRATED or ARMED → REARM: load a new alternate path (hasAlt: one is given now or was given);
//   - REARM → REARM: replace the alternate path being loaded;
//   - ARMED → MIGRATED: manual migration to the alternate path (e.g. for load balancing).
//
// The transitions REARM→ARMED (path loaded) and ARMED→MIGRATED (automatic migration on a fault)
// are the provider's, not the consumer's.
func ValidMigRequest(cur, req MigState, hasAlt bool) error {
	switch {
	case req == Rearm && (cur == Migrated || cur == Armed || cur == Rearm):
		if !hasAlt {
			return fmt.Errorf("%w: REARM needs an alternate path (AttrAltPath)", ErrInvalidTransition)
		}
		return nil
	case req == Migrated && cur == Armed:
		return nil
	case req == cur && req != Rearm:
		return nil
	}
	return fmt.Errorf("%w: path migration state %v→%v is not a consumer request", ErrInvalidTransition, cur, req)
}
