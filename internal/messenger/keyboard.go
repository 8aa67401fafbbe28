package messenger

// InlineKeyboardButton is one button of an inline keyboard, under a message: a link (URL) or, with
// CallbackData, a button whose tap reaches the bot as a callback query.
type InlineKeyboardButton struct {
	Text         string `json:"text"`
	URL          string `json:"url,omitempty"`
	CallbackData string `json:"callback_data,omitempty"`
}

// InlineKeyboardMarkup is the reply_markup of an inline keyboard: rows of buttons.
type InlineKeyboardMarkup struct {
	InlineKeyboard [][]InlineKeyboardButton `json:"inline_keyboard"`
}

// LinkPreviewOptions is sendMessage's link_preview_options: IsDisabled turns the preview of the text's
// first link off.
type LinkPreviewOptions struct {
	IsDisabled bool `json:"is_disabled,omitempty"`
}
