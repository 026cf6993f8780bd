"""Speech tags after a closing quote (``"Sorry!" I said.``): they continue the sentence."""

from __future__ import annotations

import re


# A capitalised speech tag after a closing quote that ends in ``!``, ``?``, an ellipsis or a dash
# ("Sorry!" I say. / "No!" Jo cried / "I am doing..." Raskolnikov began). Two ways to be a tag:
# a verb of speaking or voicing (any inflection of the bases below) with what may follow it, or
# any verb-shaped word that closes the clause at once ("Owwww!" I howled. / "Can they?" I ask.),
# unless it is a silent gesture ("Is he?" She nodded. is two sentences).
def _verb_forms(spec: str) -> frozenset[str]:
    """Every inflection of each ``base[/irregular...]``: base, -s/-es/-ies, -ed/-d/-ied."""
    forms: set[str] = set()
    for entry in spec.split():
        base, *irregular = entry.split("/")
        forms.update(irregular)
        forms.add(base)
        if base.endswith("y") and base[-2:-1] not in ("a", "e", "o", "u"):
            forms.update((base[:-1] + "ies", base[:-1] + "ied"))
        elif base.endswith("e"):
            forms.update((base + "s", base + "d"))
        elif base.endswith(("s", "sh", "ch", "x", "z")):
            forms.update((base + "es", base + "ed"))
        else:
            forms.update((base + "s", base + "ed"))
    return frozenset(forms)


_SPEECH_VERBS = _verb_forms(
    """say/said ask cry reply answer exclaim shout whisper mutter murmur call add continue return
    observe remark repeat rejoin retort interrupt inquire enquire demand scream shriek sob/sobbed
    wail groan growl roar gasp sigh laugh think/thought begin/began resume urge plead protest
    insist echo/echoed stammer falter bellow yell snap/snapped sneer hiss howl yelp snarl grunt
    breathe mumble grumble complain explain agree admit announce declare suggest venture hazard
    query question interpose interject ejaculate remonstrate object confess concede prompt
    persist pursue entreat implore beg/begged warn order command chuckle giggle snort stutter
    splutter sputter blurt croak squeak squeal whimper moan trail finish conclude wonder muse
    ponder reflect assent"""
)
# Silent gestures: after a quote they start a sentence of their own.
_GESTURE_VERBS = _verb_forms(
    """nod/nodded shrug/shrugged smile grin/grinned frown wince blush flush pause hesitate wait
    stop/stopped turn look stare glance blink beam scowl pout swallow shiver tremble sit/sat
    stand/stood rise/rose/risen leave/left freeze/froze wave point lean/leant step/stepped
    walk move reach hand/handed take/took listen stagger cease start plunge dance comply
    fall/fell/fallen run/ran hurry rush come/came go/went enter retreat approach kneel/knelt bow
    be/am/is/are/was/were/been have/has/had do/does/did can could shall should will would may
    might must"""
)
_TAG = re.compile(
    r"(?P<subject>I|He|She|They|We|You|It"
    r"|(?:(?:The|A|An|Old|Young|Little|Poor|My|His|Her|Our|Their)\s+)?"
    r"[A-Z][\w\u2019'-]*(?:\s+[A-Z][\w\u2019'-]*)?)"
    r"(?:\s+(?P<adverb>\w+ly))?\s+"
    r"(?P<verb>[a-z]+)(?![\w\u2019]|['-]\w)"
    r"(?:(?P<punct>\s*[,.;:!?\u2014\u2013-])|\s+(?P<next>[\w\u2019']+))?"
)
# Words that may follow a verb of speaking in a tag; anything else ("that", "nothing", "he")
# reads as a new sentence ("The mother said nothing").
_TAG_FOLLOWERS = frozenset(
    """me him her us them you to in at with from into after again aloud as for on upon
    over across and out back up off""".split()
)
# Capitalised words that open sentences but never a tag's subject ("And I noted with joy").
_NEVER_A_SUBJECT = frozenset(
    """And But Or Nor So Yet If As At In On Of To For With By From After Before Then There Now
    Here What When Where Why How Which Not Yes No Oh Ah While Until Though Although Because
    Since Once Unless Whether Is Are Was Were Do Does Did Has Have Had Will Would Can Could
    Shall Should May Might Must""".split()
)
# Subjects of a tag whose verb is not one of speaking: people, not "It" or "Nothing".
_NOT_A_VERB = frozenset(
    """this his is was has does yes us thus always perhaps towards afterwards sometimes besides
    whereas unless less its hers ours yours theirs""".split()
)
_NOT_A_SPEAKER = frozenset(
    """It This That These Those Nothing Everything Something Anything Everyone Everybody Someone
    Somebody Nobody None Silence All Each Both Such Some Many Most Few""".split()
)


def is_speech_tag(text: str, q: int, r_end: int) -> bool:
    m = _TAG.match(text, q, min(r_end, q + 80))
    if not m:
        return False
    subject, verb, follower = m.group("subject"), m.group("verb"), m.group("next")
    words = subject.split()
    if words[0] in _NEVER_A_SUBJECT:
        return False
    if verb in _SPEECH_VERBS:
        if follower is None:
            return True
        return follower in _TAG_FOLLOWERS or (follower.endswith("ly") and len(follower) > 3)
    if (verb in _GESTURE_VERBS or verb in _NOT_A_VERB or words[0] in _NOT_A_SPEAKER
            or words[-1] in _NOT_A_SPEAKER or words[-1].endswith(("ing", "ly"))):
        return False
    # any other verb: "I ask." / "We lie." take any form; "He", "She" and names a form that
    # ends as verbs do ("Peterson howled", "Grandad grumbles")
    if subject not in ("I", "We", "They", "You") and not verb.endswith(("s", "ed")):
        return False
    # ... and only when the clause ends with it
    return follower is None or follower == "aloud"
