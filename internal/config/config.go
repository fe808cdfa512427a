// Package config holds goarmci's one typed configuration, parsed once from GOARMCI_*
// environment variables and settable from Go code.
//
// Every knob has a name, type, default, unit and one line of documentation, kept in one table
// (Knobs) that `goarmci info` prints. Bootstrap variables written by launchers
// (GOARMCI_RANK, GOARMCI_SIZE, GOARMCI_RDV, ...) are listed in the same table with Launcher set;
// they are read by internal/bootstrap, not stored in Config.
package config

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// Prefix is the prefix of every goarmci environment variable.
const Prefix = "GOARMCI_"

// ErrBadValue is wrapped by errors about a knob value that does not parse or is out of range;
// the message names the variable.
var ErrBadValue = errors.New("config: bad value")

// ErrUnknownKnob is returned by Config.Set for a name that is not a knob.
var ErrUnknownKnob = errors.New("config: unknown knob")

// Transport selects how ranks reach each other.
type Transport string

const (
	// TransportAuto uses shared memory between ranks of one node and the network between nodes.
	TransportAuto Transport = "auto"
	// TransportShm uses shared memory only (every rank must share one node).
	TransportShm Transport = "shm"
	// TransportTCP uses the network (RC over TCP) for every peer, even within a node.
	TransportTCP Transport = "tcp"
)

// StatsFormat selects how statistics are printed at Finalize.
type StatsFormat string

const (
	// StatsText prints a few readable lines per rank.
	StatsText StatsFormat = "text"
	// StatsJSON prints one JSON object per rank on a line starting "goarmci stats ".
	StatsJSON StatsFormat = "json"
)

// LogFormat selects the log encoding.
type LogFormat string

const (
	// LogJSON writes one JSON object per line (zerolog's native format).
	LogJSON LogFormat = "json"
	// LogConsole writes human-readable lines.
	LogConsole LogFormat = "console"
	// LogAuto writes console lines when the log goes to a terminal, JSON otherwise (a file, a
	// pipe, a launcher that collects output).
	LogAuto LogFormat = "auto"
)

// MaxPaths bounds GOARMCI_PATHS: a channel has at most 64 subchannels
// (multirail/sched.MaxSubchannels); P paths take an LMC of ⌈log2 P⌉ ≤ 6 on every port.
const MaxPaths = 64

// Config is the runtime configuration. The zero value is not meaningful; start from Default()
// or FromEnv() and change fields, or call Set with a knob name and its text value.
type Config struct {
	// Transport: auto (shm within a node, tcp between nodes), shm or tcp. GOARMCI_TRANSPORT.
	Transport Transport
	// ShmDir is the directory of the shared-memory provider's control files (one per rank of
	// the node, goarmci.<job>.rank<N>.ctl, 580 KiB each, allocated at Init); it should be a
	// tmpfs, and every rank of a node must use the same one. GOARMCI_SHM_DIR.
	ShmDir string
	// Rails are interface names or listen addresses, one per rail; empty means the host
	// address (loopback for a single node). GOARMCI_RAILS.
	Rails []string
	// Paths is the number of paths per rail (1..MaxPaths): every network peer's channel has
	// rails × Paths subchannels, one RC queue pair per (rail, path bits), the path bits an LMC
	// offset of the destination LID [Vishnu07 §2.2, ch. 7]. GOARMCI_PATHS.
	Paths int
	// LogLevel is a zerolog level name (trace, debug, info, warn, error, fatal, panic,
	// disabled). GOARMCI_LOG_LEVEL.
	LogLevel string
	// LogFile is the log destination; empty means stderr; "%r" is replaced by the rank.
	// GOARMCI_LOG_FILE.
	LogFile string
	// LogFormat: auto (console on a terminal, JSON otherwise), json or console.
	// GOARMCI_LOG_FORMAT.
	LogFormat LogFormat
	// StartupTimeout bounds every wait at start-up (rendezvous, first exchange).
	// GOARMCI_STARTUP_TIMEOUT.
	StartupTimeout time.Duration
	// FT enables hybrid network fault tolerance on network connections ([Vishnu09]: the UD
	// connection manager, software recovery and retransmission, APM when APM is also set); off,
	// a broken connection fails its operations. GOARMCI_FT.
	FT bool
	// OnDemandThreshold: in jobs of more ranks than this, network connections are set up on
	// demand, the first time a peer is used, through the UD connection manager ([Vishnu09]
	// §IV.B.2, [Sridhar08]); up to it, every connection at Init. 0: always on demand. Needs FT.
	// GOARMCI_ON_DEMAND_THRESHOLD (as MVAPICH2's MV2_ON_DEMAND_THRESHOLD).
	OnDemandThreshold int
	// NetTransport is how network peers are reached ([Takagi15]): "rc" (a dedicated RC
	// connection per peer and rail), "dc" (the shared datagram path: one DC queue pair per rail
	// reaching every peer) or "adaptive" (the shared path, with at most MaxRC peers promoted to
	// RC connections from their traffic). GOARMCI_NET_TRANSPORT.
	NetTransport string
	// MaxRC bounds the RC connections a rank keeps open under "adaptive" (h of [Takagi15
	// §3.2]). GOARMCI_MAX_RC.
	MaxRC int
	// RCWindow is the adaptive selection's statistics window. GOARMCI_RC_WINDOW.
	RCWindow time.Duration
	// RCGamma is γ, the per-message latency reduction a new mapping must promise [Takagi15
	// §3.4]. GOARMCI_RC_GAMMA.
	RCGamma time.Duration
	// RCIdleTimeout is how long an RC connection may carry nothing before it is closed.
	// GOARMCI_RC_IDLE_TIMEOUT.
	RCIdleTimeout time.Duration
	// Bind binds each rank of a machine to its own share of the CPUs at Init ("auto": where
	// several ranks share the machine, each has a core and no launcher bound them; "none").
	// GOARMCI_BIND.
	Bind string
	// APM enables automatic path migration ([Vishnu07 ch. 9], [Vishnu09]). GOARMCI_APM.
	APM bool
	// APMTest, when positive, migrates every armed queue pair manually at this period (testing
	// APM, as MVAPICH2's MV2_USE_APM_TEST). GOARMCI_APM_TEST.
	APMTest time.Duration
	// AckTimeout is the RC ACK timeout per QP attempt (IBA local ACK timeout). GOARMCI_ACK_TIMEOUT.
	AckTimeout time.Duration
	// RetryCount is the RC retry count before the QP fails or migrates. GOARMCI_RETRY_COUNT.
	RetryCount int
	// Barrier is the algorithm of rma's Barrier: "auto" (chosen at Init from the job's shape) or
	// one of BarrierAlgs. GOARMCI_BARRIER.
	Barrier string
	// BarrierFanIn is the fan-in of the gather tree of the gather + multicast barrier
	// ([Kini03 §3.3]), 2..15 (default 7). GOARMCI_BARRIER_FANIN.
	BarrierFanIn int
	// PartitionTimeout bounds how long an operation blocks while no path to its target exists
	// before it fails with a partition error (rma.ErrPartition); default 30 s, far above what
	// APM (retries on the primary path, then a switch) and software recovery (connection
	// manager resends every 50 ms, path probes every 100 ms, a failed path avoided for 500 ms)
	// need to recover a transient fault. 0, set explicitly, waits until the operation's context
	// ends. GOARMCI_PARTITION_TIMEOUT.
	PartitionTimeout time.Duration
	// FailureTimeout bounds how long after its last heartbeat on its rendezvous connection
	// (every eighth of it) a silent rank whose host still answers (stopped, hung) is declared
	// failed to every other rank; a pause shorter than three quarters of it never is. A rank
	// whose host does not answer either (a partition) is declared after PartitionTimeout plus
	// this. A rank whose process ends is declared at once, its connection closing. 0 turns
	// heartbeats off (only ended processes are detected). The rendezvous' value holds for the
	// job.
	// GOARMCI_FAILURE_TIMEOUT.
	FailureTimeout time.Duration
	// StripePolicy names the multi-rail scheduling policy [Vishnu07 ch. 4–8]; the multirail
	// package validates it. GOARMCI_STRIPE_POLICY.
	StripePolicy string
	// StripeThreshold is the message size in bytes from which messages are striped over rails
	// instead of sent whole, on the previous operation's subchannel while it is idle, else on the
	// least busy one [Vishnu07 §5.2.3, §4.1.2]. GOARMCI_STRIPE_THRESHOLD.
	StripeThreshold int64
	// TCPPoll is "auto", "off" or a duration: how long a rank waiting for a network completion
	// polls (driving the tcp readers, tcp.Progress) before it parks (waking a parked rank costs
	// tens of µs). GOARMCI_TCP_POLL.
	TCPPoll string
	// Stats prints per-rank communication statistics at finalize, in StatsFormat. GOARMCI_STATS
	// (true: text, json: JSON).
	Stats       bool
	StatsFormat StatsFormat
}

// Default returns the configuration with every knob at its default.
func Default() Config {
	var c Config
	for _, k := range table {
		if k.set != nil {
			if err := k.set(&c, k.Default); err != nil {
				// The table's defaults are constants checked by the tests.
				panic(fmt.Sprintf("config: default of %s: %v", k.Name, err))
			}
		}
	}
	return c
}

// Warning is a non-fatal remark about the environment, such as an unknown GOARMCI_* variable.
type Warning struct {
	Var string // the variable concerned
	Msg string
}

func (w Warning) String() string { return w.Var + ": " + w.Msg }

// FromEnv parses the process environment into a Config. Unknown GOARMCI_* variables give
// warnings; an unparsable value gives an error wrapping ErrBadValue that names the variable
// (all bad values are reported, joined). Empty variables count as unset.
func FromEnv() (Config, []Warning, error) { return FromEnviron(os.Environ()) }

// FromEnviron is FromEnv over an explicit environment ("KEY=value" strings, as os.Environ).
func FromEnviron(environ []string) (Config, []Warning, error) {
	c := Default()
	var warns []Warning
	var errs []error
	vars := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, Prefix) {
			continue
		}
		vars[k] = v
	}
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		v := vars[name]
		k, ok := lookup(name)
		if !ok {
			msg := "unknown goarmci variable, ignored"
			if s := suggest(name); s != "" {
				msg += "; did you mean " + s + "?"
			}
			warns = append(warns, Warning{Var: name, Msg: msg})
			continue
		}
		if k.set == nil || v == "" {
			continue // launcher-owned, or unset
		}
		if err := k.set(&c, v); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q: %v", ErrBadValue, name, v, err))
		}
	}
	return c, warns, errors.Join(errs...)
}

// Set sets the knob called name (the environment variable name, e.g. "GOARMCI_APM") from
// its text form, as if read from the environment. Errors wrap ErrUnknownKnob or ErrBadValue;
// on error c is unchanged.
func (c *Config) Set(name, value string) error {
	k, ok := lookup(name)
	if !ok || k.set == nil {
		return fmt.Errorf("%w: %s", ErrUnknownKnob, name)
	}
	tmp := *c
	if err := k.set(&tmp, value); err != nil {
		return fmt.Errorf("%w: %s=%q: %v", ErrBadValue, name, value, err)
	}
	*c = tmp
	return nil
}

// Get returns the text form of the knob called name, as `goarmci info` prints it.
func (c *Config) Get(name string) (string, error) {
	k, ok := lookup(name)
	if !ok || k.get == nil {
		return "", fmt.Errorf("%w: %s", ErrUnknownKnob, name)
	}
	return k.get(c), nil
}

// Validate checks values set directly in Go code; errors wrap ErrBadValue and name the knob.
func (c *Config) Validate() error {
	var errs []error
	for _, k := range table {
		if k.get == nil || k.set == nil {
			continue
		}
		var tmp Config
		if err := k.set(&tmp, k.get(c)); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %v", ErrBadValue, k.Name, err))
		}
	}
	return errors.Join(errs...)
}
