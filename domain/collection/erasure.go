package collection

import (
	"fmt"
	"time"

	"github.com/samla/samla/domain"
)

// MessageUserErased is the status message of a collection ended because its user was deleted.
const MessageUserErased = "The user was deleted; the collection ended without collecting."

// EndForErasedUser ends a collection whose data subject was erased (its user was deleted): its
// personal data, the personal number it would log in with and the person it would compare the
// signer with included, is gone, so no session may go on with it, and none is left waiting for
// a signature or input. It ends FAILED, the spec's status for a collection that could not go
// on, which every non-final status may end in (AUTHENTICATION_CANCELLED would say the user
// cancelled a sign-in, and a collection already collecting could not end in it), with
// MessageUserErased saying why. The new status asks nothing of the client: no EID order, no
// instructions, no input. A final collection records nothing.
func (c *Collection) EndForErasedUser(now time.Time) error {
	if !c.Exists() {
		return fmt.Errorf("end of a collection that does not exist: %w", domain.ErrConflict)
	}
	if c.status.IsFinal() {
		return nil
	}
	return c.ChangeStatusWith(StatusFailed, StatusDetails{Message: MessageUserErased}, now)
}
