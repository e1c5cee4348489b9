//! Display names (of tenants, channels and API keys): one rule for all three.

use crate::{Error, Result};

/// Most characters in a display name.
pub const MAX_NAME_CHARS: usize = 200;

/// A display name as stored: `raw` trimmed of surrounding white space, then 1 to
/// [`MAX_NAME_CHARS`] characters with no control character (Unicode `Cc`: tab, newline, …) and
/// no bidirectional formatting character (U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which
/// would make a name show as another on the admin page or in a log. Else
/// [`Error::Invalid`] naming `name`.
pub fn display_name(raw: &str) -> Result<String> {
    let name = raw.trim();
    let bidi = |c: char| matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
    if name.is_empty()
        || name.chars().count() > MAX_NAME_CHARS
        || name.chars().any(|c| c.is_control() || bidi(c))
    {
        return Err(Error::invalid(
            "name",
            "must be 1 to 200 characters (trimmed) without control or bidirectional formatting characters",
        ));
    }
    Ok(name.to_string())
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
            &"x".repeat(201),
        ] {
            let e = display_name(bad).unwrap_err();
            assert!(e.to_string().contains("name"), "{bad:?}: {e}");
        }
    }
}
