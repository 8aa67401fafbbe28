package rate

// Allocate is allocate: the split of the global rate by demand.
var Allocate = allocate
