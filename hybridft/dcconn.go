package hybridft

import (
	"fmt"

	"github.com/goarmci/goarmci/ibv"
)

// The shared datagram path's connections: a DC queue pair (ibv.DC) is one per port and process
// and reaches every peer, each work request naming its destination ([Takagi15 §2.1]; [Sridhar08]:
// the scalable transport with the reliability in the engine). A DC Conn is the view of that
// queue pair towards one peer — its address handle and DC QP number — so a multirail channel
// can take it as a subchannel like an RC Conn: its Post fills in the destination. It is
// pass-through (no fault tolerance: a peer record whose retries run out fails its requests,
// the DC queue pair and its other peers go on), and closing it leaves the shared queue pair
// alone.

// NewDCQP creates the endpoint's DC queue pair on its port (completions on the endpoint's CQ,
// full remote access) and moves it to RTS. Errors: the verbs errors of creation and modify.
func (ep *Endpoint) NewDCQP() (*ibv.QP, error) {
	qp, err := ep.PD.CreateQP(ibv.QPInitAttr{Type: ibv.DC, SendCQ: ep.CQ, RecvCQ: ep.CQ})
	if err != nil {
		return nil, fmt.Errorf("hybridft: DC queue pair: %w", err)
	}
	steps := []struct {
		attr ibv.QPAttr
		mask ibv.AttrMask
	}{
		{ibv.QPAttr{State: ibv.StateInit, PortNum: ep.Port, AccessFlags: ibv.AccessAll}, ibv.AttrState | ibv.AttrPort | ibv.AttrAccessFlags},
		{ibv.QPAttr{State: ibv.StateRTR}, ibv.AttrState},
		{ibv.QPAttr{State: ibv.StateRTS}, ibv.AttrState},
	}
	for _, s := range steps {
		if err := qp.Modify(&s.attr, s.mask); err != nil {
			_ = qp.Destroy()
			return nil, fmt.Errorf("hybridft: DC queue pair to %v: %w", s.attr.State, err)
		}
	}
	return qp, nil
}

// DCInfo is what a peer needs to reach a DC queue pair: its port's address and LID, and its QP
// number (ConnInfo's first three fields; PSN and the rest are unused).
func DCInfo(qp *ibv.QP, ep *Endpoint) (ConnInfo, error) {
	pa, err := ep.Dev.QueryPort(ep.Port)
	if err != nil {
		return ConnInfo{}, fmt.Errorf("hybridft: %w", err)
	}
	return ConnInfo{Addr: pa.Addr, LID: pa.LID, QPN: qp.Num()}, nil
}

// NewDCConn returns the view of the DC queue pair qp (NewDCQP on ep) towards the DC queue pair
// the peer described by remote (DCInfo there): an address handle from ep's port to the peer's
// port. Errors: CreateAH's, and ibv.ErrInvalidArgument wrapped when qp is not a DC queue pair.
func (ep *Endpoint) NewDCConn(qp *ibv.QP, remote ConnInfo) (*Conn, error) {
	if qp == nil || qp.Type() != ibv.DC {
		return nil, fmt.Errorf("hybridft: %w: not a DC queue pair", ibv.ErrInvalidArgument)
	}
	ah, err := ep.PD.CreateAH(ibv.AHAttr{Addr: remote.Addr, DLID: remote.LID, PortNum: ep.Port})
	if err != nil {
		return nil, fmt.Errorf("hybridft: DC address handle: %w", err)
	}
	return &Conn{ep: ep, qp: qp, dcAH: ah, dcQPN: remote.QPN,
		local: ConnInfo{Addr: remote.Addr, LID: remote.LID, QPN: qp.Num()}}, nil
}

// DC reports whether the connection is a view of a shared DC queue pair (NewDCConn).
func (c *Conn) DC() bool { return c.dcAH != nil }
