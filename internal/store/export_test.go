package store

// PurgeSQLForTest returns each kind's purge statement, for EXPLAIN in tests.
func PurgeSQLForTest() map[PurgeKind]string {
	out := map[PurgeKind]string{}
	for k, r := range purgeRules {
		out[k] = r.purge
	}
	return out
}
