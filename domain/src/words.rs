//! `words!`: an enum whose values are stored and shown as fixed lowercase words, with `as_str`,
//! `parse` and `Display`, for the states and kinds the guide spells out.

#[macro_export]
macro_rules! words {
    ($(#[$doc:meta])* $vis:vis enum $name:ident { $($(#[$vdoc:meta])* $variant:ident = $word:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word),+
                }
            }

            pub fn parse(s: &str) -> Option<$name> {
                $name::ALL.iter().copied().find(|v| v.as_str() == s)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

#[cfg(test)]
mod tests {
    words!(
        /// A test enum.
        enum Light {
            Red = "red",
            Green = "green",
        }
    );

    #[test]
    fn words_read_and_write_as_spelled() {
        assert_eq!(Light::ALL, &[Light::Red, Light::Green]);
        assert_eq!(Light::parse("green"), Some(Light::Green));
        assert_eq!(Light::Red.to_string(), "red");
        assert_eq!(Light::parse("Red"), None);
    }
}
