//! The Ploke Code Snippet Format: how a span of code is shown to a model,
//! `<code="ABSOLUTE_PATH" #BYTE_START:BYTE_END>` + the text + `</code>`.

use std::path::Path;

/// Renders the text of `file` (relative to `root`) between `byte_start` and `byte_end`.
pub fn render(root: &Path, file: &str, byte_start: u64, byte_end: u64, text: &str) -> String {
    let path = root.join(file);
    format!(
        "<code=\"{}\" #{byte_start}:{byte_end}>\n{text}\n</code>\n",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn renders_absolute_path_and_byte_span() {
        assert_eq!(
            super::render(std::path::Path::new("/w"), "src/a.rs", 3, 12, "fn a() {}"),
            "<code=\"/w/src/a.rs\" #3:12>\nfn a() {}\n</code>\n"
        );
    }
}
