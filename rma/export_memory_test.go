package rma

// MemoryEstimates is memoryEstimates (the memory section of `goarmci info`), for the external tests.
var MemoryEstimates = memoryEstimates
