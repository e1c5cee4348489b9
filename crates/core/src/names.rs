//! Display names (of tenants, channels and API keys): one rule for all three.

use crate::{Error, Result};

/// Most characters in a display name.
pub(crate) const MAX_NAME_CHARS: usize = 200;

/// Most characters in a manual action's reason (`?reason=`).
pub const MAX_REASON_CHARS: usize = 500;

/// Whether `c` may not stand in a display text: a control character (Unicode `Cc`: tab,
/// newline, escape, …), a bidirectional formatting character (U+200E, U+200F, U+202A–U+202E,
/// U+2066–U+2069), or an invisible one (U+200B zero width space, U+2060 word joiner, U+FEFF, and
/// those listed below),
/// any of which would make a text show as another on the admin page or in a log. (The zero
/// width joiners U+200C and U+200D stay: scripts and emoji sequences need them.)
pub(crate) fn refused(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        || matches!(c, '\u{200B}' | '\u{2060}'..='\u{2064}' | '\u{206A}'..='\u{206F}' | '\u{FEFF}')
        // Line and paragraph separators (a line break by another name), the soft hyphen and
        // other characters that show as nothing: combining grapheme joiner, Mongolian vowel
        // separator, Hangul fillers, interlinear annotation controls, tag characters.
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{00AD}' | '\u{034F}' | '\u{180E}')
        || matches!(c, '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' | '\u{FFF9}'..='\u{FFFB}')
        || matches!(c, '\u{E0000}'..='\u{E007F}')
}

/// Whether `c` is a zero width joiner or non-joiner (kept inside a text, but a text of nothing
/// else shows as blank).
pub(crate) fn joiner(c: char) -> bool {
    matches!(c, '\u{200C}' | '\u{200D}')
}

/// A text a person reads, as stored: `raw` trimmed of surrounding white space, then 1 to `max`
/// characters, none of them [`refused`], and not only joiners. Else [`Error::Invalid`] naming
/// `field`.
pub fn display_text(field: &'static str, raw: &str, max: usize) -> Result<String> {
    let text = raw.trim();
    let blank = text.chars().all(|c| c.is_whitespace() || joiner(c));
    if blank || text.chars().count() > max || text.chars().any(refused) {
        return Err(Error::invalid(
            field,
            format!(
                "must be 1 to {max} characters (trimmed) without control, bidirectional \
                 formatting or invisible characters"
            ),
        ));
    }
    Ok(text.to_string())
}

/// A display name (of a tenant, a channel or a key) as stored: [`display_text`] of `name`, 1 to
/// [`MAX_NAME_CHARS`] characters.
pub(crate) fn display_name(raw: &str) -> Result<String> {
    display_text("name", raw, MAX_NAME_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_trimmed_and_refused_when_empty_long_or_with_control_characters() {
        assert_eq!(display_name("  acme ").unwrap(), "acme");
        assert_eq!(display_name("Ünïcode ok").unwrap(), "Ünïcode ok");
        assert_eq!(display_name(&"x".repeat(200)).unwrap().len(), 200);
        for bad in [
            "",
            "   ",
            "a\tb",
            "a\nb",
            "a\u{0}b",
            "evil\u{202E}gnp.exe",
            "\u{2066}x",
            "ac\u{200B}me",
            "\u{FEFF}acme",
            &"x".repeat(201),
        ] {
            let e = display_name(bad).unwrap_err();
            assert!(e.to_string().contains("name"), "{bad:?}: {e}");
        }
        // Joiners stay: an emoji sequence and a Persian name that needs U+200C.
        assert!(display_name("team \u{1F468}\u{200D}\u{1F4BB}").is_ok());
        assert!(display_name("\u{0645}\u{06CC}\u{200C}\u{062E}\u{0648}\u{0627}\u{0645}").is_ok());
    }

    #[test]
    fn a_reason_follows_the_same_rule_up_to_500_characters() {
        assert_eq!(
            display_text("reason", " db migration ", MAX_REASON_CHARS).unwrap(),
            "db migration"
        );
        assert!(display_text("reason", &"r".repeat(500), MAX_REASON_CHARS).is_ok());
        for bad in [
            "line1\n2026-12-02 ERROR fake",
            "\u{1b}[31mred",
            "x\u{202E}y",
            "",
            &"r".repeat(501),
            "\u{200D}",
            "a\u{2028}b",
            "a\u{00AD}b",
            "a\u{3164}b",
            "a\u{E0001}b",
        ] {
            let e = display_text("reason", bad, MAX_REASON_CHARS).unwrap_err();
            assert!(e.to_string().starts_with("reason: "), "{bad:?}: {e}");
        }
    }
}
