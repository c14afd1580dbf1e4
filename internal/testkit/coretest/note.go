package coretest

import (
	"encoding/json"
	"time"

	"github.com/aivax-examples/idempotent-callback/idem"
	"github.com/aivax-examples/idempotent-callback/internal/core"
)

// CreateNote is the test-only write tool's name.
const CreateNote = "create_note"

// NoteBusy is create_note's busy message.
const NoteBusy = "The notebook is busy and the note may or may not be saved. Call again with the same text and request."

// NoteKind is the kind of create_note's items and of their effect: a
// destination receives each note as a "note.created" event.
const NoteKind = "note"

// NoteAnswer is create_note's answer, stored by the first call and
// replayed with deduplicated: true.
type NoteAnswer struct {
	Status       string `json:"status"`
	NoteID       string `json:"note_id"`
	Deduplicated bool   `json:"deduplicated"`
}

// NoteEvent is a note as a destination receives it (the webhook's body).
type NoteEvent struct {
	Type     string `json:"type"` // "note.created"
	NoteID   string `json:"note_id"`
	TenantID string `json:"tenant_id"`
	UserID   string `json:"user_id"`
	Text     string `json:"text"`
	SavedAt  string `json:"saved_at"`
}

// NoteKey is the key of note id's item.
func NoteKey(id string) string { return core.EffectKeyPrefix(NoteKind) + id }

// Note is a write tool defined in this file and nowhere else
// (docs/adding-a-tool.md shows it): its name, schemas, annotations, validation,
// plan, answer and messages. It writes a kind of item no store knows (a
// note, under "NOTE#<note_id>") with an effect of a kind no destination
// names (the webhook delivers it as it delivers every kind), and answers
// with members of its own (note_id), which no door knows.
func Note() core.Function {
	return core.Function{
		Name:        CreateNote,
		Description: "Save a note for the user's organisation; calling again with the same request saves it once.",
		Fields: []core.Field{{Name: "text", Description: "The note, 1 to 200 characters.",
			Required: true, MinLen: 1, MaxLen: 200, Trim: true, NoControl: true}},
		Answer: core.Answer{Kind: core.KindCreated, Members: map[string]any{
			"note_id": map[string]any{"type": "string"}, "deduplicated": map[string]any{"type": "boolean"},
		}, Required: []string{"note_id", "deduplicated"}},
		Write: &core.Write{
			Plan: func(r core.Request, k idem.OpKey) ([]byte, core.Writes, error) {
				id := r.NewID()
				stored, err := json.Marshal(NoteAnswer{Status: core.KindCreated.String(), NoteID: id})
				if err != nil {
					return nil, core.Writes{}, err
				}
				payload, err := json.Marshal(NoteEvent{Type: "note.created", NoteID: id, TenantID: r.User.TenantID,
					UserID: r.User.UserID, Text: r.Args["text"], SavedAt: r.Now.UTC().Format(time.RFC3339)})
				return stored, core.Writes{Items: []core.ItemWrite{{Op: core.PutNew, Key: NoteKey(id), Set: core.Item{
					core.AttrTenantID: r.User.TenantID, core.AttrUserID: r.User.UserID, "operation_key": k.ID, "text": r.Args["text"],
				}, Effect: &core.Effect{Kind: NoteKind, ID: id, Payload: payload}}}}, err
			},
			Answer: func(stored []byte, repeat bool) ([]byte, bool) {
				var a NoteAnswer
				if json.Unmarshal(stored, &a) != nil || a.NoteID == "" {
					return nil, false // answered internal: a stored answer the tool cannot read
				}
				a.Deduplicated = repeat
				b, err := json.Marshal(a)
				return b, err == nil
			},
			InProgress: "The note is still being saved; check again later with the same request.",
			Mismatch:   "This request already saved another note; start a new request for this one.",
		},
		Busy: NoteBusy,
	}
}
