// Package udcm is the scalable out-of-band connection manager of Hybrid-IBNFT [Vishnu09 §IV.B.2]:
// one unreliable-datagram queue pair per process, created at initialization, whose resources do
// not grow with the job size, carrying the REQ/REP/ACK messages of the connection
// re-establishment protocol (Fig. 8). UD gives no delivery or order guarantee; the protocol
// (package hybridft) resends on a timer, ignores duplicates and tells faults apart by a
// per-pair sequence ID (§IV.D). It also carries the CONN_REQ/REP/RTU/REJ messages that set RC
// connections up on demand, and the CONN_DREQ/DREP messages that tear them down
// (hybridft.OnDemand).
//
// The CM runs on its own udp device, one port per rail, so that a message can be sent on every
// rail at once: whichever rail survives carries it.
package udcm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider/udp"
	"github.com/goarmci/goarmci/internal/secret"
)

// QKey is the Q_Key of every CM queue pair.
const QKey = 0x4846_5443

const (
	recvDepth = 64
	bufLen    = 4096
)

// Handler receives every well-formed message (on the CM's goroutine; it must not block long).
// from is the provider address of the sending port.
type Handler func(m *Msg, from string)

// CM is a process's connection manager endpoint.
type CM struct {
	dev     *ibv.Context
	pd      *ibv.PD
	scq     *ibv.CQ
	rcq     *ibv.CQ
	qp      *ibv.QP
	srq     *ibv.SRQ // the receives' shared receive queue (Open), or nil: the QP's receive queue
	rmu     sync.Mutex
	chunks  []recvChunk // the receive buffers, recvPerChunk each (rmu)
	addrs   []string
	handler Handler
	log     zerolog.Logger
	key     secret.Key        // the job's: every message is sealed and checked with it
	keyErr  error             // WithKey's key was not a secret
	rejects secret.Rejections // datagrams dropped: malformed, or a MAC that is not the job's

	mu   sync.Mutex // serializes sends (AH cache, encode buffer)
	ahs  map[string]*ibv.AH
	sbuf []byte

	cancel context.CancelFunc
	wg     sync.WaitGroup
	ownDev bool // Open created dev: Close closes it
}

// Option configures Open and OpenOn.
type Option func(*CM)

// WithKey sets the job's secret (internal/secret, 32 bytes): every message carries a MAC made
// with it (Seal) and a received message whose MAC is not the job's is dropped and counted
// (Rejected). Without it (or with an empty key) the MACs authenticate nothing (tests). A key
// of another length fails Open and OpenOn (ibv.ErrInvalidArgument).
func WithKey(key []byte) Option {
	return func(c *CM) { c.key, c.keyErr = secret.FromBytes(key) }
}

// Open creates the CM on a new udp device with one port per listen address ("ip:0" style, at
// least one) and starts its receive goroutine, which hands messages to h until Close.
func Open(listen []string, h Handler, log *zerolog.Logger, opts ...Option) (*CM, error) {
	if len(listen) == 0 || h == nil {
		return nil, fmt.Errorf("udcm: %w: no listen address or handler", ibv.ErrInvalidArgument)
	}
	pcs := make([]udp.PortConfig, len(listen))
	for i, l := range listen {
		pcs[i] = udp.PortConfig{Listen: l}
	}
	dev, err := udp.Open(udp.Config{Name: "udcm", Ports: pcs, Log: log})
	if err != nil {
		return nil, fmt.Errorf("udcm: %w", err)
	}
	c, err := open(dev, len(listen), h, log, true, opts)
	if err != nil {
		_ = dev.Close()
		return nil, err
	}
	return c, nil
}

// OpenOn creates the CM on an open device that supports UD queue pairs, one port per rail (all
// of its ports), e.g. a node of ibv/fabric, and starts its receive goroutine. Close destroys
// the CM's queue pair but leaves the device open.
func OpenOn(dev *ibv.Context, h Handler, log *zerolog.Logger, opts ...Option) (*CM, error) {
	if dev == nil || h == nil {
		return nil, fmt.Errorf("udcm: %w: no device or handler", ibv.ErrInvalidArgument)
	}
	return open(dev, dev.QueryDevice().PhysPortCnt, h, log, false, opts)
}

func open(dev *ibv.Context, nports int, h Handler, log *zerolog.Logger, ownDev bool, opts []Option) (*CM, error) {
	c := &CM{dev: dev, handler: h, ahs: map[string]*ibv.AH{}, ownDev: ownDev}
	for _, o := range opts {
		o(c)
	}
	if c.keyErr != nil {
		return nil, fmt.Errorf("udcm: %w: %w", ibv.ErrInvalidArgument, c.keyErr)
	}
	if log != nil {
		c.log = *log
	} else {
		c.log = zerolog.Nop()
	}
	if err := c.setup(nports); err != nil {
		if c.qp != nil {
			_ = c.qp.Destroy()
		}
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go c.recvLoop(ctx)
	if c.srq != nil {
		c.wg.Add(1)
		go c.eventLoop(ctx)
	}
	return c, nil
}

func (c *CM) setup(nports int) error {
	var err error
	if c.pd, err = c.dev.AllocPD(); err != nil {
		return fmt.Errorf("udcm: %w", err)
	}
	if c.scq, err = c.dev.CreateCQ(16); err != nil {
		return fmt.Errorf("udcm: %w", err)
	}
	if c.rcq, err = c.dev.CreateCQ(recvDepth * 2); err != nil {
		return fmt.Errorf("udcm: %w", err)
	}
	if c.ownDev {
		c.srq, _ = c.pd.CreateSRQ(recvDepth) // without one, every buffer is posted to the QP
	}
	c.qp, err = c.pd.CreateQP(ibv.QPInitAttr{Type: ibv.UD, SendCQ: c.scq, RecvCQ: c.rcq, SRQ: c.srq,
		Cap: ibv.QPCap{MaxRecvWR: recvDepth, MaxSendWR: 64}})
	if err != nil {
		return fmt.Errorf("udcm: %w", err)
	}
	if err := c.qp.Modify(&ibv.QPAttr{State: ibv.StateInit, PortNum: 1, QKey: QKey}, ibv.AttrState|ibv.AttrPort|ibv.AttrQKey); err != nil {
		return fmt.Errorf("udcm: %w", err)
	}
	if err := c.qp.Modify(&ibv.QPAttr{State: ibv.StateRTR}, ibv.AttrState); err != nil {
		return fmt.Errorf("udcm: %w", err)
	}
	if err := c.qp.Modify(&ibv.QPAttr{State: ibv.StateRTS, SQPSN: 1}, ibv.AttrState|ibv.AttrSQPSN); err != nil {
		return fmt.Errorf("udcm: %w", err)
	}
	if err := c.addChunks(); err != nil {
		return err
	}
	for p := 1; p <= nports; p++ {
		pa, err := c.dev.QueryPort(uint8(p))
		if err != nil {
			return fmt.Errorf("udcm: %w", err)
		}
		c.addrs = append(c.addrs, pa.Addr)
	}
	return nil
}

// Addrs are the CM's port addresses, one per rail (what peers send to).
func (c *CM) Addrs() []string { return append([]string(nil), c.addrs...) }

// QPN is the CM's UD queue pair number.
func (c *CM) QPN() uint32 { return c.qp.Num() }

// Send encodes m and sends it to the CM at qpn on every address in to, each from the local port
// of the same index (rail i to rail i; the last local port for extra addresses). Errors wrap
// ErrMalformed; an unreachable rail is not an error (UD: the protocol resends).
func (c *CM) Send(to []string, qpn uint32, m *Msg) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := m.Append(c.sbuf[:0])
	if err != nil {
		return err
	}
	b = seal(c.key, b)
	c.sbuf = b
	sent := false
	for i, addr := range to {
		port := uint8(min(i+1, len(c.addrs)))
		key := fmt.Sprintf("%d/%s", port, addr)
		ah := c.ahs[key]
		if ah == nil {
			if ah, err = c.pd.CreateAH(ibv.AHAttr{Addr: addr, PortNum: port}); err != nil {
				c.log.Debug().Err(err).Str("to", addr).Msg("udcm: address handle")
				continue
			}
			c.ahs[key] = ah
		}
		if err := c.qp.PostSend(&ibv.SendWR{Opcode: ibv.OpSend, LocalBuf: b, AH: ah, RemoteQPN: qpn, QKey: QKey}); err != nil {
			c.log.Debug().Err(err).Str("to", addr).Msg("udcm: send")
			continue
		}
		sent = true
	}
	if !sent && len(to) > 0 {
		return fmt.Errorf("udcm: %w: no rail took the message", ibv.ErrUnreachable)
	}
	return nil
}

// dropped counts a datagram that is not a message of the job and logs it, at most once per
// secret.LogEvery.
func (c *CM) dropped(from string, err error) {
	if log, sup := c.rejects.Add(time.Now()); log {
		c.log.Warn().Err(err).Str("from", from).Uint64("dropped", c.rejects.Count()).Uint64("not_logged", sup).
			Msg("udcm: dropped a datagram that is not the job's")
	}
}

// Rejected is the number of datagrams the CM dropped: malformed, or with a MAC that is not the
// job's (WithKey).
func (c *CM) Rejected() uint64 { return c.rejects.Count() }

// Close stops the receive goroutine and closes the CM's device.
func (c *CM) Close() error {
	c.cancel()
	c.wg.Wait()
	if !c.ownDev {
		return c.qp.Destroy()
	}
	return c.dev.Close()
}

// Device is the device of the CM's UD queue pair (tests pull its ports down with
// udp.SetPortDown).
func (c *CM) Device() *ibv.Context { return c.dev }

func (c *CM) recvLoop(ctx context.Context) {
	defer c.wg.Done()
	var wcs [16]ibv.WC
	var m Msg
	for {
		n := c.rcq.Poll(wcs[:])
		for i := 0; i < n; i++ {
			wc := &wcs[i]
			if wc.Status == ibv.WCSuccess && wc.WRID < recvDepth {
				b := c.buf(wc.WRID)[:wc.ByteLen]
				body, err := unseal(c.key, b)
				if err == nil {
					err = m.Decode(body)
				}
				if err == nil {
					c.handler(&m, wc.SrcAddr)
				} else {
					c.dropped(wc.SrcAddr, err)
				}
			}
			if wc.WRID < recvDepth {
				if err := c.postRecv(wc.WRID); err != nil && !errors.Is(err, ibv.ErrClosed) {
					c.log.Warn().Err(err).Msg("udcm: repost receive")
				}
			}
		}
		// drain send completions (only failed sends produce any)
		for c.scq.Poll(wcs[:]) > 0 {
		}
		if n > 0 {
			continue
		}
		if err := c.rcq.Wait(ctx); err != nil {
			return
		}
	}
}
