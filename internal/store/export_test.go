package store

// FinishUpdateSQL is the status write of FinishDelivery without its callback events: what the statement was
// before callbacks, for the benchmark that measures what they add.
const FinishUpdateSQL = finishUpdateSQL
