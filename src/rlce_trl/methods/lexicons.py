"""Video-Zero's evidence lexicons [ours].

The RLCE paper (appendix D.5) scores the Questioner's evidence description with "a small lexicon of action cues
(31 entries) and temporal cues (19 entries)" but does not publish the entries. These are ours, written for the social
behaviour clips of the HBA tasks (what a speaker visibly or audibly does; when in the clip it happens). Entries are
matched as whole words or phrases in the lower-cased description (`video_zero.lexicon_hits`); each entry counts once.
"""

from __future__ import annotations

#: Observable actions of a speaker (face, gesture, voice, posture), 31 entries.
ACTION_CUES: tuple[str, ...] = (
    "smiles", "smiling", "laughs", "laughing", "frowns", "frowning", "nods", "nodding", "shakes head", "shrugs",
    "gestures", "points", "waves", "raises eyebrows", "rolls eyes", "looks away", "looks down", "leans forward",
    "leans back", "crosses arms", "sighs", "pauses", "hesitates", "raises voice", "whispers", "claps", "grins",
    "winks", "turns", "stands up", "sits down",
)

#: Where or when in the clip something happens, 19 entries.
TEMPORAL_CUES: tuple[str, ...] = (
    "before", "after", "while", "during", "then", "when", "until", "at first", "at the start", "at the beginning",
    "in the middle", "at the end", "toward the end", "finally", "later", "earlier", "suddenly", "immediately",
    "seconds",
)

