"""Who may call: API keys and their scopes, and the web view's signed sessions."""
