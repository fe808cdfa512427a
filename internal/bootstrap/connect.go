package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/goarmci/goarmci/internal/config"
	"github.com/goarmci/goarmci/internal/secret"
)

// pmiRDVKey is the PMI key under which rank 0 publishes the rendezvous address.
const pmiRDVKey = "goarmci-rdv"

// Option configures Connect.
type Option func(*connectOptions)

type connectOptions struct {
	log          zerolog.Logger
	closeTimeout time.Duration
	listen       string
	failTimeout  time.Duration
	partTimeout  time.Duration
}

// WithLogger sets the logger of the client (and of the service when this rank hosts it).
func WithLogger(l zerolog.Logger) Option { return func(o *connectOptions) { o.log = l } }

// WithFailureTimeout sets the failure timeout of a service this rank hosts (see
// WithServerFailureTimeout; default DefaultFailureTimeout). Every rank uses the timeout
// of the service it joins.
func WithFailureTimeout(d time.Duration) Option {
	return func(o *connectOptions) { o.failTimeout = max(d, 0) }
}

// WithPartitionTimeout sets the partition timeout of a service this rank hosts (see
// WithServerPartitionTimeout; default DefaultPartitionTimeout).
func WithPartitionTimeout(d time.Duration) Option {
	return func(o *connectOptions) { o.partTimeout = max(d, 0) }
}

// Connect joins the job's rendezvous service and performs the first exchange (every rank's
// PeerInfo, see Peers), so it returns once every rank has arrived. Every wait ends with ctx:
// give it the start-up deadline (config GOARMCI_STARTUP_TIMEOUT). Where the service is:
//
//   - GOARMCI_RDV given: there. Launched by goarmci run, the launcher hosts it; with another
//     launcher, rank 0 hosts it on that address's port.
//   - PMI-1 available (MPICH/Hydra mpiexec, srun --mpi=pmi2): rank 0 hosts it on an ephemeral
//     port and publishes host:port under "goarmci-rdv" in the PMI key-value space; the others
//     read it after a PMI barrier.
//   - Slurm: rank 0 hosts it on the first host of SLURM_STEP_NODELIST, at a port derived from
//     the job and step ids.
//   - Open MPI without GOARMCI_RDV (mpirun offers no key-value service reachable without
//     linking MPI or PMIx): rank 0 hosts it on an ephemeral port — on loopback when every rank
//     is on its node, else on every interface, advertising the address of its first up
//     non-loopback IPv4 interface as under PMI-1 — and writes host:port atomically (mode 0600)
//     to Info.RDVFile (see Detect: in GOARMCI_RDV_DIR, else a node-local temporary directory
//     when every rank is on one node, else $HOME/.goarmci/rdv). The others poll the file
//     (5 ms to 500 ms backoff) and re-read it after a failed dial. Rank 0 removes the file once
//     every rank has joined, or when its Connect fails.
//   - a single process: rank 0 hosts it on loopback.
//
// A service this rank hosts is owned by the Client and stopped by Close after every rank has
// left. Errors: ErrBadEnv, ErrStartupTimeout (naming the launcher and the ranks that never
// arrived, or the rendezvous file that never appeared; also wraps ctx.Err()), ErrAddrInUse
// (rank 0 must host the service on a fixed port that another process holds), ErrProtocol (the
// address answered with something that is not a goarmci rendezvous), ErrRefused, ErrPeerLost,
// ErrPMI.
func Connect(ctx context.Context, info Info, opts ...Option) (_ *Client, err error) {
	o := connectOptions{log: zerolog.Nop(), closeTimeout: 60 * time.Second, failTimeout: DefaultFailureTimeout,
		partTimeout: DefaultPartitionTimeout}
	for _, f := range opts {
		f(&o)
	}
	if info.Size < 1 || info.Rank < 0 || info.Rank >= info.Size {
		return nil, fmt.Errorf("%w: rank %d of %d", ErrBadEnv, info.Rank, info.Size)
	}
	c := &Client{info: info, log: o.log, closeTimeout: o.closeTimeout, pending: map[uint64]chan frame{},
		readerDone: make(chan struct{}), failures: map[int]*PeerFailure{}, hostRank: 0}
	if info.Launcher == LauncherGoarmci && info.RDV != "" {
		c.hostRank = -1 // goarmci run hosts the rendezvous (locate)
	}
	defer func() {
		if err != nil {
			c.abort()
		}
	}()

	addr, host, err := c.locate(ctx, &o)
	if err != nil {
		return nil, err
	}
	c.addr = addr
	if !host && info.Launcher == LauncherPMI && c.pmi == nil {
		// unreachable: locate dials PMI for every PMI rank
		return nil, fmt.Errorf("%w: PMI not connected", ErrPMI)
	}
	if c.conn == nil { // the rendezvous file's reader dials in locate
		conn, err := dialRetry(ctx, addr)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: rendezvous %s never answered (its host: %s): %w", ErrStartupTimeout, info,
				addr, rdvHostDesc(info), err)
		}
		c.conn = conn
	}
	conn := c.conn

	// Hello, the secret handshake (auth.go) and Welcome under ctx.
	stop := deadlineFromContext(ctx, conn)
	h := hello{rank: info.Rank, size: info.Size, jobID: info.JobID, nonce: secret.Nonce()}
	keyed := false
	err = writeFrame(conn, mHello, h.encode())
	var f frame
	if err == nil {
		f, err = readFrame(conn)
	}
	if err == nil && f.typ == mChallenge {
		var ch challenge
		var proof []byte
		if ch, err = decodeChallenge(f.payload); err == nil {
			keyed = ch.keyed
			proof, err = answerChallenge(info.Secret, &h, &ch)
		}
		if err == nil {
			err = writeFrame(conn, mAuth, encodeAuth(proof))
		}
		if err == nil {
			f, err = readFrame(conn)
		}
	}
	stop()
	if err != nil {
		if cause := ctxCause(ctx, err); cause != nil {
			return nil, fmt.Errorf("%w: %s: no welcome from rendezvous %s (another program listening on that port?): %w",
				ErrStartupTimeout, info, addr, cause)
		}
		if errors.Is(err, ErrAuth) {
			return nil, fmt.Errorf("bootstrap: %s: rendezvous %s: %w", info, addr, err)
		}
		if errors.Is(err, ErrProtocol) {
			return nil, fmt.Errorf("bootstrap: %s: %s is not a goarmci rendezvous of this version "+
				"(another program listening on that port?): %w", info, addr, err)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
			return nil, fmt.Errorf("bootstrap: %s: %s closed the connection without a welcome: not a goarmci rendezvous, "+
				"or its host failed: %w", info, addr, err)
		}
		return nil, fmt.Errorf("bootstrap: hello to rendezvous %s: %w", addr, err)
	}
	switch f.typ {
	case mWelcome:
		d := dec{b: f.payload}
		c.jobID = d.str()
		c.failTimeout = time.Duration(d.u64())
		c.partTimeout = time.Duration(d.u64())
		handed := d.bytes()
		if err := d.done(); err != nil {
			return nil, err
		}
		if c.secret, err = secretFromWelcome(info.Secret, keyed, handed); err != nil {
			return nil, err
		}
		if c.failTimeout < 0 || c.failTimeout > 24*time.Hour || c.partTimeout < 0 || c.partTimeout > 24*time.Hour {
			return nil, fmt.Errorf("%w: failure timeout %v, partition timeout %v in the welcome", ErrProtocol, c.failTimeout, c.partTimeout)
		}
	case mError:
		return nil, decodeError(f.payload)
	default:
		return nil, fmt.Errorf("%w: answer %d to hello", ErrProtocol, f.typ)
	}
	c.det = newDetector(1, c.failTimeout, c.partTimeout)
	c.base = time.Now()
	c.pongWake = make(chan struct{})
	c.det.join(0, c.base)
	c.reading = true
	go c.readLoop()
	if c.failTimeout > 0 {
		c.pingStop, c.pingDone = make(chan struct{}), make(chan struct{})
		go c.heartbeat()
	}

	// First exchange: who is where.
	var pe enc
	pe.str(info.Host)
	pe.str(info.HostID)
	parts, err := c.AllGather(ctx, pe.b)
	if err != nil {
		return nil, err
	}
	c.peers = make([]PeerInfo, info.Size)
	for r, p := range parts {
		d := dec{b: p}
		c.peers[r] = PeerInfo{Rank: r, Host: d.str(), HostID: d.str()}
		if err := d.done(); err != nil {
			return nil, fmt.Errorf("bootstrap: peer info of rank %d: %w", r, err)
		}
	}
	c.started = true
	c.removeRDVFile()
	o.log.Debug().Str("rdv", addr).Str("job", c.jobID).Int("local", len(c.LocalRanks())).Msg("bootstrap: joined")
	return c, nil
}

// abort releases what a failed Connect started.
func (c *Client) abort() {
	c.closing.Store(true)
	c.stopHeartbeat()
	if c.conn != nil {
		if c.reading {
			// Leave politely so the others' errors name the ranks still missing rather than
			// this rank as lost.
			var e enc
			e.u64(0)
			_ = c.write(mBye, e.b)
		}
		c.fail(ErrClosed)
		c.conn.Close()
		if c.reading {
			<-c.readerDone
		}
	}
	if c.server != nil {
		c.server.Close()
	}
	if c.pmi != nil {
		c.pmi.close()
	}
	c.removeRDVFile()
}

// removeRDVFile removes the rendezvous file this rank wrote, if any: after the first exchange
// (every rank has read it) or when Connect fails. A failure is logged, not returned: the file
// names one job and misleads no other.
func (c *Client) removeRDVFile() {
	if c.rdvFile == "" {
		return
	}
	if err := os.Remove(c.rdvFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.log.Warn().Err(err).Str("file", c.rdvFile).Msg("bootstrap: removing the rendezvous file")
	}
	c.rdvFile = ""
}

// locate finds the rendezvous address, starting the service when this rank hosts it.
func (c *Client) locate(ctx context.Context, o *connectOptions) (addr string, hosted bool, err error) {
	info := c.info
	switch {
	case info.Launcher == LauncherGoarmci && info.RDV != "":
		return info.RDV, false, nil
	case info.RDV != "":
		if info.Rank == 0 {
			_, port, _ := net.SplitHostPort(info.RDV)
			if err := c.host(o, ":"+port); err != nil {
				if errors.Is(err, ErrAddrInUse) {
					err = fmt.Errorf("%w: choose a free port in %s=%s", err, config.EnvRDV, info.RDV)
					if info.Launcher == LauncherOpenMPI {
						err = fmt.Errorf("%w, or leave %s unset (rank 0 then picks a free port)", err, config.EnvRDV)
					}
				}
				return "", false, err
			}
			return dialable(info.RDV, c.server.Addr()), true, nil
		}
		return info.RDV, false, nil
	case info.Size == 1:
		if err := c.host(o, "127.0.0.1:0"); err != nil {
			return "", false, err
		}
		return c.server.Addr().String(), true, nil
	case info.PMI != nil:
		p, err := dialPMI(ctx, info.PMI)
		if err != nil {
			if ctxCause(ctx, err) != nil || errors.Is(err, context.DeadlineExceeded) {
				return "", false, fmt.Errorf("%w: %s: PMI server: %w", ErrStartupTimeout, info, err)
			}
			return "", false, fmt.Errorf("bootstrap: %s: %w", info, err)
		}
		c.pmi = p
		if info.Rank == 0 {
			if err := c.host(o, ":0"); err != nil {
				return "", false, err
			}
			_, port, _ := net.SplitHostPort(c.server.Addr().String())
			addr = net.JoinHostPort(advertiseHost(), port)
			if err := p.put(ctx, pmiRDVKey, addr); err != nil {
				return "", false, err
			}
		}
		if err := p.barrier(ctx); err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return "", false, fmt.Errorf("%w: %s: PMI barrier before the rendezvous: %w", ErrStartupTimeout, info, err)
			}
			return "", false, err
		}
		if info.Rank == 0 {
			return dialable(addr, c.server.Addr()), true, nil
		}
		addr, err = p.get(ctx, pmiRDVKey)
		if err != nil {
			return "", false, err
		}
		if err := checkAddr(addr); err != nil {
			return "", false, fmt.Errorf("%w: PMI %s=%q: %v", ErrProtocol, pmiRDVKey, addr, err)
		}
		return addr, false, nil
	case info.Launcher == LauncherSlurm:
		if info.Nodelist == "" {
			return "", false, fmt.Errorf("%w: Slurm without SLURM_STEP_NODELIST: set GOARMCI_RDV=host:port", ErrBadEnv)
		}
		hosts, err := ExpandHostlist(info.Nodelist)
		if err != nil {
			return "", false, err
		}
		port := strconv.Itoa(slurmPort(info.JobID))
		if info.Rank == 0 {
			if err := c.host(o, ":"+port); err != nil {
				if errors.Is(err, ErrAddrInUse) {
					return "", false, fmt.Errorf("%w: the port derived from job step %s is taken (by another job step on "+
						"this node?): set %s=host:port to choose another port", err, info.JobID, config.EnvRDV)
				}
				return "", false, fmt.Errorf("%w (set %s=host:port to choose another port)", err, config.EnvRDV)
			}
			return dialable(net.JoinHostPort(hosts[0], port), c.server.Addr()), true, nil
		}
		return net.JoinHostPort(hosts[0], port), false, nil
	case info.Launcher == LauncherOpenMPI:
		if info.RDVFile == "" {
			return "", false, fmt.Errorf("%w: %s: Open MPI without %s and without a rendezvous file (Info.RDVFile, "+
				"set by Detect)", ErrBadEnv, info, config.EnvRDV)
		}
		if info.Rank == 0 {
			if err := c.host(o, rdvFileListen(info)); err != nil {
				return "", false, err
			}
			addr := rdvFileAdvertise(info, c.server.Addr())
			if err := writeRDVFile(info.RDVFile, addr); err != nil {
				return "", false, fmt.Errorf("%w: %s: %w", ErrBadEnv, info, err)
			}
			c.rdvFile = info.RDVFile
			o.log.Debug().Str("file", info.RDVFile).Str("rdv", addr).Msg("bootstrap: rendezvous file written")
			return dialable(addr, c.server.Addr()), true, nil
		}
		addr, conn, err := awaitRDVFile(ctx, info, info.RDVFile)
		if err != nil {
			return "", false, err
		}
		c.conn = conn
		return addr, false, nil
	case info.Launcher == LauncherGoarmci:
		return "", false, fmt.Errorf("%w: GOARMCI_RANK without GOARMCI_RDV", ErrBadEnv)
	}
	return "", false, fmt.Errorf("%w: %s: no way to find the rendezvous: set GOARMCI_RDV=host:port", ErrBadEnv, info)
}

// host starts the service this rank owns, listening on listen (or the WithListenAddr one).
func (c *Client) host(o *connectOptions, listen string) error {
	if o.listen != "" {
		listen = o.listen
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%w: %s: rendezvous port %s is already in use (another job?)", ErrAddrInUse, c.info, listen)
		}
		return fmt.Errorf("bootstrap: %s: hosting the rendezvous on %s: %w", c.info, listen, err)
	}
	s, err := NewServer(ln, c.info.Size, WithJobID(c.info.JobID), WithServerLogger(o.log), WithSecret(c.info.Secret),
		WithServerFailureTimeout(o.failTimeout), WithServerPartitionTimeout(o.partTimeout))
	if err != nil {
		ln.Close()
		return err
	}
	c.server = s
	return nil
}

// dialable is the address rank 0 dials to reach its own service: loopback at the bound port
// (the advertised host name may not resolve locally); advertised is what the others dial.
func dialable(advertised string, bound net.Addr) string {
	_ = advertised
	_, port, _ := net.SplitHostPort(bound.String())
	return net.JoinHostPort("127.0.0.1", port)
}

func rdvHostDesc(info Info) string {
	switch {
	case info.Launcher == LauncherGoarmci:
		return "goarmci run"
	default:
		return "rank 0"
	}
}

// dialRetry dials addr until it answers or ctx ends (the service may not be up yet).
func dialRetry(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	backoff := 5 * time.Millisecond
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetNoDelay(true)
			}
			return conn, nil
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// advertiseHost picks the address other nodes reach this host at: the first global unicast
// IPv4 address of an up, non-loopback interface, else the host name, else 127.0.0.1.
func advertiseHost() string {
	ifs, _ := net.Interfaces()
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}
