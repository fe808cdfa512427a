// Package rma is goarmci's ARMCI layer: one-sided Put/Get/Accumulate (contiguous, strided,
// vector; blocking and non-blocking), read-modify-write, mutexes, fences and the barrier, over
// collective memory segments, for N ranks that may share a node (shared memory, one copy) or not
// (the network rails).
//
// Each call mirrors an ARMCI call: Init/Finalize (ARMCI_Init/ARMCI_Finalize), Malloc/Free
// (ARMCI_Malloc/ARMCI_Free), Put/Get/Acc (ARMCI_Put/Get/Acc), PutS/GetS/AccS (ARMCI_PutS/...),
// PutV/GetV/AccV (ARMCI_PutV/...), Nb* with Handle.Wait and WaitAll (ARMCI_NbPut/ARMCI_Wait/
// ARMCI_WaitAll), Rmw (ARMCI_Rmw), CreateMutexes/Lock/Unlock (ARMCI_Create_mutexes/ARMCI_Lock/
// ARMCI_Unlock), Fence/AllFence (ARMCI_Fence/ARMCI_AllFence), Barrier (ARMCI_Barrier), GroupCreate
// and the Group's Size/Rank/Absolute/Malloc/Barrier/AllReduce/Broadcast/Free (ARMCI_Group_create,
// ARMCI_Group_size/rank, ARMCI_Absolute_id, ARMCI_Malloc_group, ARMCI_Group_free, [ARMCI]).
//
// Remote memory is named by (segment, rank, byte offset) instead of ARMCI's remote pointers.
//
// Completion and ordering ([ARMCI]): a blocking Put/Acc returns when the source buffer may
// be reused; Fence(p)/AllFence make issued operations complete at the target; operations from one
// origin to one target that overlap are applied in program order (a Get after a Put to the same
// location returns the new data with no fence). Acc is atomic per element with respect to other
// accumulates; Rmw is atomic. The barrier is the RDMA dissemination barrier of [Kini03 §3].
package rma
