// Package bootstrap starts a goarmci job: it finds this process's rank and size
// from the launcher's environment (Detect), joins the job's rendezvous service and keeps it for
// the whole job (Connect, Client.AllGather, Client.Barrier, a small key-value store), and tells
// which ranks share a node (Client.Peers).
//
// Launchers, in the order Detect tries them: goarmci's own `goarmci run` (GOARMCI_RANK,
// GOARMCI_SIZE, GOARMCI_RDV, GOARMCI_JOBID), Open MPI's mpirun (OMPI_COMM_WORLD_*), Slurm's
// srun (SLURM_PROCID, SLURM_NTASKS, ...), MPICH/Hydra's mpiexec over PMI-1 (PMI_RANK, PMI_SIZE,
// PMI_FD or PMI_PORT), else a single process. See Detect for how nested launches (mpirun inside
// a Slurm allocation) are told apart.
//
// The rendezvous service is a small TCP server (Server) holding a key-value store and
// collectives over all ranks. Where it runs: `goarmci run` hosts it and passes GOARMCI_RDV;
// otherwise rank 0 hosts it inside Connect (owned by its Client, stopped on Close after every
// rank has left) and the others learn its address from GOARMCI_RDV, the PMI-1 key-value space,
// under Open MPI a file rank 0 writes (rdvfile.go), or, under Slurm, the first host of
// SLURM_STEP_NODELIST at a port derived from the job and step ids. The wire format is versioned and length-prefixed (wire.go).
//
// The same connection detects failed ranks (liveness.go): a rank whose connection closes before
// its goodbye, or that stays silent for the failure timeout (heartbeats), is reported to every
// other rank (Client.OnPeerFailure, error *PeerFailure wrapping ErrPeerLost).
//
// This is the out-of-band channel of the runtime, in the role of MPI's PMI or ARMCI's use of
// MPI for start-up: small messages, start-up and collective allocation only, never on the
// data path.
package bootstrap
