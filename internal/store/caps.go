package store

import "errors"

// MaxCategoryOptOuts caps a tenant's user's opt-outs of single categories (the whole tenant's opt-out is
// always taken): spec v1-extensions §9 meant a handful, and /stop, /resume and the claim read them.
const MaxCategoryOptOuts = 100

// MaxChatCategories caps the categories of one tenant's user that /stop offers in a chat.
const MaxChatCategories = 100

// ErrTooManyOptOuts means a category opt-out past MaxCategoryOptOuts (409 limit_reached).
var ErrTooManyOptOuts = errors.New("too many category opt-outs")
