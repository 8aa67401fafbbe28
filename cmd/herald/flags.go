package main

import "flag"

// flagSet lets admin subcommands add their own flags next to the shared ones.
type flagSet struct{ *flag.FlagSet }
