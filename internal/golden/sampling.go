package golden

// Request-level sampling annotations (ARCHITECTURE.md §6): every record a
// sampler keeps says which policy kept its request and how many requests it
// stands for, so that counts over kept records stay unbiased.
const (
	// SamplingPolicy names the policy that kept the record's request.
	SamplingPolicy = "sampling.policy"
	// SamplingAdjustedCount is 1 ÷ the probability with which the record's
	// request was kept (a double): 1 for a request kept by a 100% policy, 100
	// for one kept by a 1% base rate.
	SamplingAdjustedCount = "sampling.adjusted_count"
)
