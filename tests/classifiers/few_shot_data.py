"""Four topical intents and sentence frames: few-shot training data small enough for a test."""

TOPICS = {
    "weather": ["rain", "sunny", "forecast", "cloudy", "storm"],
    "music": ["song", "album", "playlist", "band", "jazz"],
    "food": ["pizza", "pasta", "dinner", "sushi", "lunch"],
    "travel": ["flight", "hotel", "train", "airport", "ticket"],
}
FRAMES = ["tell me about the {}", "what about {} today", "i want some {} please", "any {} news",
          "{} now", "is there a {}", "find me a {}", "more {}"]
