package hybridft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/goarmci/goarmci/ibv"
)

// ErrMalformed: a ConnInfo blob that does not decode.
var ErrMalformed = errors.New("hybridft: malformed connection info")

// Endpoint holds one process's per-device resources that its connections share: the protection
// domain and the completion queue every RC queue pair of the device reports to.
type Endpoint struct {
	Dev  *ibv.Context
	PD   *ibv.PD
	CQ   *ibv.CQ
	Port uint8 // local port (rail) new connections use
}

// NewEndpoint allocates the PD and a CQ of cqe entries on dev, for connections on port.
func NewEndpoint(dev *ibv.Context, port uint8, cqe int) (*Endpoint, error) {
	pd, err := dev.AllocPD()
	if err != nil {
		return nil, fmt.Errorf("hybridft: endpoint: %w", err)
	}
	cq, err := dev.CreateCQ(cqe)
	if err != nil {
		return nil, fmt.Errorf("hybridft: endpoint: %w", err)
	}
	return &Endpoint{Dev: dev, PD: pd, CQ: cq, Port: port}, nil
}

// ConnInfo is what a peer needs to connect to a queue pair: the port's address and LID, the QP
// number and the first PSN. It travels through the bootstrap exchange (or, later, the UD
// connection manager).
type ConnInfo struct {
	Addr string
	LID  uint16
	QPN  uint32
	PSN  uint32
}

const connInfoVersion = 1

// Marshal encodes the info (version byte, fields, address).
func (ci ConnInfo) Marshal() []byte {
	b := make([]byte, 0, 12+len(ci.Addr))
	b = append(b, connInfoVersion)
	b = binary.LittleEndian.AppendUint16(b, ci.LID)
	b = binary.LittleEndian.AppendUint32(b, ci.QPN)
	b = binary.LittleEndian.AppendUint32(b, ci.PSN)
	b = append(b, byte(len(ci.Addr)))
	return append(b, ci.Addr...)
}

// UnmarshalConnInfo decodes Marshal's output; errors wrap ErrMalformed.
func UnmarshalConnInfo(b []byte) (ConnInfo, error) {
	if len(b) < 12 || b[0] != connInfoVersion {
		return ConnInfo{}, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	n := int(b[11])
	if len(b) != 12+n {
		return ConnInfo{}, fmt.Errorf("%w: address length %d in %d bytes", ErrMalformed, n, len(b))
	}
	return ConnInfo{LID: binary.LittleEndian.Uint16(b[1:]), QPN: binary.LittleEndian.Uint32(b[3:]),
		PSN: binary.LittleEndian.Uint32(b[7:]), Addr: string(b[12:])}, nil
}

// Conn is one RC connection to a peer.
type Conn struct {
	ep    *Endpoint
	qp    *ibv.QP
	local ConnInfo
}

// NewConn creates an RC queue pair on the endpoint, moves it to INIT with full remote access and
// returns it with the ConnInfo to send to the peer.
func (ep *Endpoint) NewConn() (*Conn, error) {
	qp, err := ep.PD.CreateQP(ibv.QPInitAttr{Type: ibv.RC, SendCQ: ep.CQ, RecvCQ: ep.CQ})
	if err != nil {
		return nil, fmt.Errorf("hybridft: %w", err)
	}
	if err := qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: ep.Port, AccessFlags: ibv.AccessAll},
		ibv.AttrState|ibv.AttrPort|ibv.AttrAccessFlags); err != nil {
		_ = qp.Destroy()
		return nil, fmt.Errorf("hybridft: %w", err)
	}
	pa, err := ep.Dev.QueryPort(ep.Port)
	if err != nil {
		_ = qp.Destroy()
		return nil, fmt.Errorf("hybridft: %w", err)
	}
	return &Conn{ep: ep, qp: qp, local: ConnInfo{Addr: pa.Addr, LID: pa.LID, QPN: qp.Num(), PSN: rand.Uint32() & 0xffffff}}, nil
}

// Local is the info the peer needs.
func (c *Conn) Local() ConnInfo { return c.local }

// QP is the connection's queue pair.
func (c *Conn) QP() *ibv.QP { return c.qp }

// Connect moves the queue pair to RTR and RTS towards the remote queue pair described by r.
func (c *Conn) Connect(r ConnInfo) error {
	err := c.qp.Modify(&ibv.QPAttr{State: ibv.StateRTR, AV: ibv.AHAttr{Addr: r.Addr, DLID: r.LID, PortNum: c.ep.Port},
		DestQPN: r.QPN, RQPSN: r.PSN}, ibv.AttrState|ibv.AttrAV|ibv.AttrDestQPN|ibv.AttrRQPSN)
	if err != nil {
		return fmt.Errorf("hybridft: connect to %s qp %d: %w", r.Addr, r.QPN, err)
	}
	if err := c.qp.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: c.local.PSN}, ibv.AttrState|ibv.AttrSQPSN); err != nil {
		return fmt.Errorf("hybridft: connect to %s qp %d: %w", r.Addr, r.QPN, err)
	}
	return nil
}

// Post posts a work request on the connection.
func (c *Conn) Post(wr *ibv.SendWR) error { return c.qp.PostSend(wr) }

// Close destroys the queue pair.
func (c *Conn) Close() error { return c.qp.Destroy() }

// Poll takes up to len(wc) completions of the endpoint's connections (the completion filter of
// seed 000 §10.3: when recovery is on, failed completions of a recoverable path are absorbed here
// and their work requests re-issued; today every completion passes through).
func (ep *Endpoint) Poll(wc []ibv.WC) int { return ep.CQ.Poll(wc) }

// Wait blocks until a completion may be ready to Poll, ctx ends or the device closes.
func (ep *Endpoint) Wait(ctx context.Context) error { return ep.CQ.Wait(ctx) }
